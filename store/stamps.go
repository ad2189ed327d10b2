package store

import (
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// What the gateway reads back from a stored message is input as much as a
// request is: anyone who may publish on a queue subject stores whatever
// headers and body they like. Nothing read back may crash the gateway, wrap
// its arithmetic around, or make a message fail every pull.

// Stamps are the values the gateway stamps on a message at push (Encode)
// or release and reads back at delivery. A header that is absent, not a
// number, or out of range reads as absent.
type Stamps struct {
	Delivered int   // Lmq-Delivered: deliveries used by earlier copies; 0 when absent
	Retry     int   // Lmq-Retry: the retry property at push; -1 when absent
	PushedAt  int64 // Lmq-Pushed: Unix nanoseconds; 0 when absent
	Expires   int64 // Lmq-Expires: Unix nanoseconds; 0 when absent (never)
}

// MaxDeliveries bounds Lmq-Delivered: a message has at most
// mapping.MaxRetry+1 deliveries, so anything larger was not stamped by a
// gateway. With both counts at most math.MaxInt32, sums of them and
// JetStream's delivery count cannot overflow an int.
const MaxDeliveries = mapping.MaxRetry + 1

// ReadStamps reads the stamped values of a message's headers. An absent
// header is not parsed at all: strconv allocates an error for "",
// and most messages lack Lmq-Delivered and Lmq-Expires (this runs for every
// pulled message). h is a nats.Header or Headers (either converts to its
// type without a copy).
func ReadStamps(h map[string][]string) Stamps {
	s := Stamps{Retry: -1}
	if v, ok := stampedInt(h, mapping.HdrDelivered); ok && v >= 0 && v <= MaxDeliveries {
		s.Delivered = int(v)
	}
	if v, ok := stampedInt(h, mapping.HdrRetry); ok && v >= 0 && v <= mapping.MaxRetry {
		s.Retry = int(v)
	}
	if v, ok := stampedInt(h, mapping.HdrPushedAt); ok && v > 0 {
		s.PushedAt = v
	}
	if v, ok := stampedInt(h, mapping.HdrExpires); ok && v != 0 {
		s.Expires = v
	}
	return s
}

// stampedInt is header name's first value as a decimal int64; false when
// absent or not a number.
func stampedInt(h map[string][]string, name string) (int64, bool) {
	v := nats.Header(h).Get(name)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// MessagePriority is a stored message's priority, from its subject (the
// deliverable ones) or its Lmq-Priority header (dead letters); 0 when it
// has none or a bad one (data read back from the stream is input too).
func MessagePriority(subject string, hdr interface{ Get(string) string }) int {
	if p, ok := mapping.SubjectPriority(subject); ok {
		return p
	}
	if v := hdr.Get(mapping.HdrPriority); v != "" {
		if p, err := mapping.ParsePriority(v); err == nil {
			return p
		}
	}
	return 0
}
