package gateway

import (
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// What the gateway reads back from a stored message is input as much as a
// request is: anyone who may publish on a queue subject stores whatever
// headers and body they like. Nothing read back may crash the gateway, wrap
// its arithmetic around, or make a message fail every pull.

// stamped are the values the gateway stamps on a message at push and reads
// back at delivery. A header that is absent, not a number, or out of range
// reads as absent.
type stamped struct {
	delivered int   // Lmq-Delivered: deliveries used by earlier copies; 0 when absent
	retry     int   // Lmq-Retry: the retry property at push; -1 when absent
	pushedAt  int64 // Lmq-Pushed: Unix nanoseconds; 0 when absent
	expires   int64 // Lmq-Expires: Unix nanoseconds; 0 when absent (never)
}

// maxDeliveries bounds Lmq-Delivered: a message has at most mapping.MaxRetry+1
// deliveries, so anything larger was not stamped by a gateway. With both
// counts at most math.MaxInt32, sums of them and JetStream's delivery count
// cannot overflow an int.
const maxDeliveries = mapping.MaxRetry + 1

// readStamped reads the stamped values of a message's headers. An absent
// header is not parsed at all: strconv allocates an error for "",
// and most messages lack Lmq-Delivered and Lmq-Expires (this runs for every
// pulled message).
func readStamped(h nats.Header) stamped {
	s := stamped{retry: -1}
	if v, ok := stampedInt(h, mapping.HdrDelivered); ok && v >= 0 && v <= maxDeliveries {
		s.delivered = int(v)
	}
	if v, ok := stampedInt(h, mapping.HdrRetry); ok && v >= 0 && v <= mapping.MaxRetry {
		s.retry = int(v)
	}
	if v, ok := stampedInt(h, mapping.HdrPushedAt); ok && v > 0 {
		s.pushedAt = v
	}
	if v, ok := stampedInt(h, mapping.HdrExpires); ok && v != 0 {
		s.expires = v
	}
	return s
}

// stampedInt is header name's first value as a decimal int64; false when
// absent or not a number.
func stampedInt(h nats.Header, name string) (int64, bool) {
	v := h.Get(name)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}
