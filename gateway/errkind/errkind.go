// Package errkind is the one classification of the core's errors (Of):
// what an error means to a client, whatever the protocol. Every front
// end's mapper (HTTP, RPC, SQS, the console) switches on it through
// gateway.KindOf; gateway.Kind is Kind, gateway.None… are these.
// The sentinels are store's, registry's and mapping's, which gateway's
// ErrNotFound… are.
package errkind

import (
	"context"
	"errors"

	"github.com/lmq-gateway/lmq-gateway/gateway/registry"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// Kind is what an error means to a client, whatever the protocol: the
// one classification of the core's errors that every front end's mapper
// (HTTP, RPC, SQS, the console) switches on, each turning a kind into its
// protocol's status, code and text. The precedence between sentinels that
// one error may wrap together is decided here, once (Of).
type Kind int

const (
	// None: no error.
	None Kind = iota
	// Invalid: the request is malformed (ErrInvalid; an invalid queue
	// name, mapping.ErrInvalidName; invalid properties,
	// mapping.ErrInvalidProps, which RPC answers with its own code). HTTP
	// 400.
	Invalid
	// NotFound: no such queue, delivery or message (ErrNotFound; also
	// gateway.ErrAlreadyAcked, which wraps it and which HTTP tells apart with a
	// header). HTTP 404.
	NotFound
	// TooManyQueues: the request would create a queue beyond
	// gateway.Config.MaxQueues (ErrTooManyQueues). HTTP 409.
	TooManyQueues
	// TooLarge: the message is beyond the maximum size (ErrTooLarge).
	// HTTP 413.
	TooLarge
	// HeaderTooLarge: headers to store with the message are too large
	// (ErrHeaderTooLarge). HTTP 431.
	HeaderTooLarge
	// Unknown: the request may or may not have taken effect
	// (ErrUnknown). HTTP 504.
	Unknown
	// Unavailable: nothing happened, the same request may succeed later
	// (ErrUnavailable; also gateway.ErrBusy, which wraps it). HTTP 503.
	Unavailable
	// Canceled: a context ended the request (context.Canceled,
	// context.DeadlineExceeded) and nothing above says more: the gateway
	// stopping, a bound of its own, or the client leaving (which front ends
	// tell from the request itself). Never a failure: HTTP 503.
	Canceled
	// Internal: anything else, a fault of the gateway. HTTP 500.
	Internal
)

var kindNames = [...]string{"none", "invalid", "not found", "too many queues", "too large",
	"header too large", "unknown", "unavailable", "canceled", "internal"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "ErrorKind(?)"
	}
	return kindNames[k]
}

// ClientFault reports whether the kind is the request's own fault (HTTP's
// 4xx): it is answered as such even to a client that has left, where the
// other kinds are the gateway's state and a client that left reads nothing.
func (k Kind) ClientFault() bool {
	switch k {
	case Invalid, NotFound, TooManyQueues, TooLarge, HeaderTooLarge:
		return true
	}
	return false
}

// Of classifies err. An error may wrap several sentinels (an invalid
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
//     ErrUnavailable). A canceled context is never Internal.
//  9. anything else: Internal.
func Of(err error) Kind {
	switch {
	case err == nil:
		return None
	case errors.Is(err, store.ErrInvalid), errors.Is(err, mapping.ErrInvalidName), errors.Is(err, mapping.ErrInvalidProps):
		return Invalid
	case errors.Is(err, store.ErrNotFound):
		return NotFound
	case errors.Is(err, registry.ErrTooManyQueues):
		return TooManyQueues
	case errors.Is(err, store.ErrTooLarge):
		return TooLarge
	case errors.Is(err, store.ErrHeaderTooLarge):
		return HeaderTooLarge
	case errors.Is(err, store.ErrUnknown):
		return Unknown
	case errors.Is(err, store.ErrUnavailable):
		return Unavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Canceled
	}
	return Internal
}
