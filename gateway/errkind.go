package gateway

import (
	"context"
	"errors"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// ErrorKind is what an error means to a client, whatever the protocol: the
// one classification of the core's errors that every front end's mapper
// (HTTP, RPC, SQS, the console) switches on, each turning a kind into its
// protocol's status, code and text. The precedence between sentinels that
// one error may wrap together is decided here, once (KindOf).
type ErrorKind int

const (
	// KindNone: no error.
	KindNone ErrorKind = iota
	// KindInvalid: the request is malformed (ErrInvalid; an invalid queue
	// name, mapping.ErrInvalidName; invalid properties,
	// mapping.ErrInvalidProps, which RPC answers with its own code). HTTP
	// 400.
	KindInvalid
	// KindNotFound: no such queue, delivery or message (ErrNotFound; also
	// ErrAlreadyAcked, which wraps it and which HTTP tells apart with a
	// header). HTTP 404.
	KindNotFound
	// KindTooManyQueues: the request would create a queue beyond
	// Config.MaxQueues (ErrTooManyQueues). HTTP 409.
	KindTooManyQueues
	// KindTooLarge: the message is beyond the maximum size (ErrTooLarge).
	// HTTP 413.
	KindTooLarge
	// KindHeaderTooLarge: headers to store with the message are too large
	// (ErrHeaderTooLarge). HTTP 431.
	KindHeaderTooLarge
	// KindUnknown: the request may or may not have taken effect
	// (ErrUnknown). HTTP 504.
	KindUnknown
	// KindUnavailable: nothing happened, the same request may succeed later
	// (ErrUnavailable; also ErrBusy, which wraps it). HTTP 503.
	KindUnavailable
	// KindCanceled: a context ended the request (context.Canceled,
	// context.DeadlineExceeded) and nothing above says more: the gateway
	// stopping, a bound of its own, or the client leaving (which front ends
	// tell from the request itself). Never a failure: HTTP 503.
	KindCanceled
	// KindInternal: anything else, a fault of the gateway. HTTP 500.
	KindInternal
)

var kindNames = [...]string{"none", "invalid", "not found", "too many queues", "too large",
	"header too large", "unknown", "unavailable", "canceled", "internal"}

func (k ErrorKind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "ErrorKind(?)"
	}
	return kindNames[k]
}

// ClientFault reports whether the kind is the request's own fault (HTTP's
// 4xx): it is answered as such even to a client that has left, where the
// other kinds are the gateway's state and a client that left reads nothing.
func (k ErrorKind) ClientFault() bool {
	switch k {
	case KindInvalid, KindNotFound, KindTooManyQueues, KindTooLarge, KindHeaderTooLarge:
		return true
	}
	return false
}

// KindOf classifies err. An error may wrap several sentinels (an invalid
// name inside ErrInvalid, a deadline inside ErrUnknown or ErrUnavailable);
// the first that matches, in this order, decides:
//
//  1. ErrInvalid, mapping.ErrInvalidName, mapping.ErrInvalidProps: a
//     malformed request is refused before anything is looked up, whatever
//     else went wrong beside it.
//  2. ErrNotFound (ErrAlreadyAcked).
//  3. ErrTooManyQueues, 4. ErrTooLarge, 5. ErrHeaderTooLarge: the request is
//     fine but cannot be taken as it is.
//  6. ErrUnknown before 7. ErrUnavailable (ErrBusy): ErrUnavailable promises
//     that nothing happened, which cannot hold when anything in the chain
//     says the outcome is unknown (a client must not retry a push blindly).
//  8. context.Canceled, context.DeadlineExceeded: only when no sentinel
//     says more (a store's deadline is its ErrUnknown, a read's its
//     ErrUnavailable). A canceled context is never KindInternal.
//  9. anything else: KindInternal.
func KindOf(err error) ErrorKind {
	switch {
	case err == nil:
		return KindNone
	case errors.Is(err, ErrInvalid), errors.Is(err, mapping.ErrInvalidName), errors.Is(err, mapping.ErrInvalidProps):
		return KindInvalid
	case errors.Is(err, ErrNotFound):
		return KindNotFound
	case errors.Is(err, ErrTooManyQueues):
		return KindTooManyQueues
	case errors.Is(err, ErrTooLarge):
		return KindTooLarge
	case errors.Is(err, ErrHeaderTooLarge):
		return KindHeaderTooLarge
	case errors.Is(err, ErrUnknown):
		return KindUnknown
	case errors.Is(err, ErrUnavailable):
		return KindUnavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return KindCanceled
	}
	return KindInternal
}
