package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// The outcomes a store reports. Package gateway exports the same values
// under the same names (front ends match them with errors.Is); they are
// defined here because this is where they are decided.
var (
	// ErrNotFound: unknown queue, unknown or expired delivery id. HTTP 404.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: invalid name, properties, regexp, reply. HTTP 400.
	ErrInvalid = errors.New("invalid request")
	// ErrUnavailable: NATS/JetStream not reachable or not answering, or
	// the store refused for want of space; nothing happened. HTTP 503.
	ErrUnavailable = errors.New("jetstream unavailable")
	// ErrTooLarge: message larger than the configured maximum. HTTP 413.
	ErrTooLarge = errors.New("message too large")
	// ErrHeaderTooLarge: headers the store would keep are too large. HTTP 431.
	ErrHeaderTooLarge = errors.New("header too large")
	// ErrUnknown: the request reached JetStream but its answer did not come
	// back in time, so it may or may not have taken effect. HTTP 504. It is
	// never wrapped together with ErrUnavailable, which promises that
	// nothing happened.
	ErrUnknown = errors.New("outcome unknown")
)

// JetStream API error codes (nats-server's jetstream_errors_generated.go)
// that Classify tells apart; nats.go names none of them.
const (
	jsErrInsufficientResources jetstream.ErrorCode = 10023 // disk full, account limits
	jsErrMemoryResources       jetstream.ErrorCode = 10028
	jsErrStorageResources      jetstream.ErrorCode = 10047
	jsErrHeaderTooLarge        jetstream.ErrorCode = 10097 // headers beyond 64 KiB
)

// Classify turns a JetStream/NATS failure of op into one of the outcomes
// front ends answer: the package's own sentinels and a canceled context
// pass through (wrapped with op), known API errors by code
// (classifyAPIError), anything else is ErrUnavailable. An error already
// wrapping ErrUnknown (an Outcome classified again on its way up) stays
// unknown and only that: ErrUnavailable beside it would promise that
// nothing happened.
func Classify(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrUnknown) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if cerr, ok := classifyAPIError(op, err); ok {
		return cerr
	}
	return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
}

// Outcome classifies a failed request to JetStream whose effect is a state
// change (a store, an ack): if the request may have reached JetStream and
// only the answer is missing, the outcome is unknown (ErrUnknown);
// otherwise, e.g. no responders, nothing happened (Classify).
func Outcome(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, ErrUnknown):
		// Canceled: the caller's own doing. Already unknown: said once.
		return fmt.Errorf("%s: %w", op, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrDisconnected):
		return fmt.Errorf("%s: %w: %w", op, ErrUnknown, err)
	}
	return Classify(op, err)
}

// classifyAPIError is Classify's rule for the JetStream API errors it knows
// by code; ok is false for the others. A store out of resources (the disk
// full, a limit reached) may take the next attempt once space is freed:
// unavailable, which front ends answer 503 with Retry-After. Headers too
// large never will: gateway.CheckHeaders should have caught them, this is
// the backstop.
func classifyAPIError(op string, err error) (_ error, ok bool) {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return nil, false
	}
	switch apiErr.ErrorCode {
	case jsErrInsufficientResources, jsErrMemoryResources, jsErrStorageResources:
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err), true
	case jsErrHeaderTooLarge:
		return fmt.Errorf("%s: %w: %w", op, ErrHeaderTooLarge, err), true
	}
	return nil, false
}

// IsStorageFull reports a failure for want of storage: JetStream's limit
// reached ("insufficient resources") or the disk full. Writes may succeed
// again once space is freed; removals (stream purges, acks) need none.
func IsStorageFull(err error) bool { return err != nil && isStorageErr(err) }

// isStorageErr tells failures of the store itself (disk full, limits) from
// others (timeouts, bad input). Their retries may succeed once space is
// freed.
func isStorageErr(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jsErrInsufficientResources, jsErrMemoryResources, jsErrStorageResources:
			return true
		}
	}
	s := err.Error()
	return strings.Contains(s, "no space left") || strings.Contains(s, "insufficient resources") ||
		strings.Contains(s, "jetstream store failed")
}

// StreamGone reports whether err says that a shard stream does not exist
// (an operator deleted it while this store was making or using it).
func StreamGone(err error) bool { return errors.Is(err, jetstream.ErrStreamNotFound) }

// NotStored reports whether a read by sequence (ReadBack) failed because
// the stream no longer holds the message.
func NotStored(err error) bool { return errors.Is(err, jetstream.ErrMsgNotFound) }

// CheckQueueName is ErrInvalid, saying why, for a name that is not a queue
// name (mapping.ValidateQueueName); nil for one that is.
func CheckQueueName(queue string) error {
	if err := mapping.ValidateQueueName(queue); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}
