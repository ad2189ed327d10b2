package gateway

import (
	"fmt"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/inflight"
	"github.com/lmq-gateway/lmq-gateway/gateway/message"
	"github.com/lmq-gateway/lmq-gateway/gateway/registry"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// Header is one kept request header (message.Header).
type Header = message.Header

// Message is what a client pushes, and one part of a compound delivery
// (message.Message: its fields ContentType, Body and Kept).
type Message = message.Message

// AccumState is a push's answer about accumulation: LMQ's "no", "new", "yes".
type AccumState string

// Push answers.
const (
	AccumNo  AccumState = "no"  // the queue does not accumulate
	AccumNew AccumState = "new" // the push opened a window
	AccumYes AccumState = "yes" // the push joined an open window
)

// Delivery is one handing-out of a message to a client.
type Delivery struct {
	Queue string
	// ID is the fresh delivery id (a UUID) the client replies with.
	ID string
	// Compound is true for accumulated messages (LMQ "compound" / "package").
	Compound bool
	// RetryRemaining is LMQ's x-lmq-retry-remaining.
	RetryRemaining int
	// Priority is the message's priority (0..mapping.MaxPriority), beyond LMQ.
	Priority int
	// Group is the message's ordered group ("" for none), beyond LMQ:
	// x-lmq-group.
	Group string
	// Seq is the stream sequence of the stored copy handed out (it
	// changes when a released message is stored again).
	Seq uint64
	// Receives counts the message's deliveries, this one included (SQS's
	// ApproximateReceiveCount).
	Receives int
	// PushedAt is when the message was pushed and FirstReceivedAt when it
	// was first handed out (this delivery, for a first one); PushedAt is
	// zero when unknown.
	PushedAt, FirstReceivedAt time.Time
	// Message is the content of a normal message.
	Message Message
	// Parts are the parts of a compound message, in push order.
	Parts []Message

	// ref lets the core find the delivery again (Abandon).
	ref *inflight.Entry
	// releaseOnDisconnect is the queue's property at the delivery
	// (releaseconn.go).
	releaseOnDisconnect bool
}

// ReplyKind is the client's answer to a delivery.
type ReplyKind int

// Replies: ack (done), nack (release; back to the queue at once, counts a retry),
// ext (retain; restart the timeout).
const (
	Ack ReplyKind = iota + 1
	Nack
	Ext
)

// ParseReply maps LMQ's reply words (HTTP ack/nack/ext) to a ReplyKind.
func ParseReply(s string) (ReplyKind, error) {
	switch s {
	case "ack":
		return Ack, nil
	case "nack":
		return Nack, nil
	case "ext":
		return Ext, nil
	}
	return 0, fmt.Errorf("%w: reply must be ack, nack or ext, not %q", ErrInvalid, s)
}

func (k ReplyKind) String() string {
	switch k {
	case Ack:
		return "ack"
	case Nack:
		return "nack"
	case Ext:
		return "ext"
	}
	return fmt.Sprintf("ReplyKind(%d)", int(k))
}

// Errors front ends map onto status codes (with errors.Is). Those that
// describe a store's outcome are the store package's own values.
var (
	// ErrNotFound: unknown queue, unknown or expired delivery id. HTTP 404.
	ErrNotFound = store.ErrNotFound
	// ErrInvalid: invalid name, properties, regexp, reply. HTTP 400.
	ErrInvalid = store.ErrInvalid
	// ErrUnavailable: NATS/JetStream not reachable or not answering. HTTP 503.
	ErrUnavailable = store.ErrUnavailable
	// ErrTooLarge: message larger than the configured maximum. HTTP 413.
	ErrTooLarge = store.ErrTooLarge
	// ErrHeaderTooLarge: a request header the gateway would store with the
	// message (content-type, a kept header) is beyond mapping.MaxHeaderValue
	// or mapping.MaxStoredHeaders. HTTP 431.
	ErrHeaderTooLarge = store.ErrHeaderTooLarge
	// ErrUnknown: the request reached JetStream but its answer did not come
	// back in time (a timeout or a lost connection), so it may or may not
	// have taken effect: a push may be stored, an ack may be applied. HTTP
	// 504. It is never wrapped together with ErrUnavailable, which promises
	// that nothing happened.
	ErrUnknown = store.ErrUnknown
	// ErrTooManyQueues: the request would create a queue while
	// Config.MaxQueues exist. HTTP 409; nothing was changed, and the same
	// request succeeds once a queue is deleted. Package registry's value.
	ErrTooManyQueues = registry.ErrTooManyQueues
	// ErrAlreadyAcked: a reply to a delivery that this gateway saw acked
	// (recently): the ack the client may be retrying took effect. It wraps
	// ErrNotFound, so LMQ's answer (404) is kept; front ends may say more.
	ErrAlreadyAcked = inflight.ErrAlreadyAcked
)
