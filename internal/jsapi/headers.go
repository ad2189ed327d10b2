package jsapi

import (
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream's message vocabulary: the acknowledgement bodies a consumer's
// client sends to a delivery's reply subject, and the headers by which a
// publisher asks the server for something (a schedule, a TTL, a
// de-duplication id). Spelled here once; TestOneSpeller fails when another
// non-test file spells them.

// Acknowledgement bodies (ADR-15).
var (
	// AckBody acknowledges a delivery: on a work-queue stream the message is
	// removed.
	AckBody = []byte("+ACK")
	// ProgressBody ("work in progress") restarts the delivery's AckWait.
	ProgressBody = []byte("+WPI")
)

// HeaderPrefix starts every header that belongs to JetStream (its own
// stamps and the requests above); a copy of a stored message must not
// carry them over (a copy would inherit a batch id, a message id that makes
// it a duplicate, a TTL or schedule markers of the original).
const HeaderPrefix = "Nats-"

// Headers of a message schedule (ADR-51) and of a per-message TTL (ADR-43).
const (
	scheduleHeader       = "Nats-Schedule"
	scheduleTargetHeader = "Nats-Schedule-Target"
	ttlHeader            = "Nats-TTL"
)

// ServerHeader reports whether the header name k belongs to JetStream.
func ServerHeader(k string) bool { return strings.HasPrefix(k, HeaderPrefix) }

// ScheduleHeader reports whether k is one of a message schedule's headers.
func ScheduleHeader(k string) bool { return strings.HasPrefix(k, scheduleHeader) }

// CopyOwnHeaders copies src's headers to dst, except JetStream's own.
func CopyOwnHeaders(dst, src map[string][]string) {
	for k, v := range src {
		if !ServerHeader(k) {
			dst[k] = v
		}
	}
}

// SetScheduleAt makes m a schedule that the server fires once, at due, by
// publishing a copy of m to target. Sub-second times need RFC 3339 with
// nanoseconds (nats.go's helper truncates to seconds).
func SetScheduleAt(h map[string][]string, due time.Time, target string) {
	nats.Header(h).Set(scheduleHeader, "@at "+due.UTC().Format(time.RFC3339Nano))
	SetScheduleTarget(h, target)
}

// SetScheduleTarget names the subject a schedule fires to.
func SetScheduleTarget(h map[string][]string, target string) {
	nats.Header(h).Set(scheduleTargetHeader, target)
}

// SetMsgID gives m a de-duplication id (Nats-Msg-Id): within the stream's
// duplicate window JetStream stores one message of an id and answers the
// others as duplicates.
func SetMsgID(h map[string][]string, id string) { nats.Header(h).Set(jetstream.MsgIDHeader, id) }

// SetExpectLastSubjectSeq makes the store of m conditional: JetStream
// stores it only while the last message on its subject is at sequence seq
// (0: while the subject holds none), else it answers "wrong last sequence".
func SetExpectLastSubjectSeq(h map[string][]string, seq uint64) {
	nats.Header(h).Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(seq, 10))
}

// SetTTL lets JetStream remove m once ttl has passed: whole seconds,
// rounded up, at least one (so holders of an exact expiry check it
// themselves before delivering).
func SetTTL(h map[string][]string, ttl time.Duration) {
	secs := int64((ttl + time.Second - 1) / time.Second)
	nats.Header(h).Set(ttlHeader, strconv.FormatInt(max(secs, 1), 10)+"s")
}
