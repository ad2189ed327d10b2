package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// TestKindOf: every sentinel a front end answers is one kind, alone, wrapped
// once or twice, and where several are wrapped together the precedence
// KindOf documents decides; a canceled context is never KindInternal.
func TestKindOf(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return fmt.Errorf("op: %w", err) }
	busy := fmt.Errorf("%w (limit 3); try again", gateway.ErrBusy)
	sentinels := []struct {
		err  error
		want gateway.ErrorKind
	}{
		{gateway.ErrInvalid, gateway.KindInvalid},
		{mapping.ErrInvalidName, gateway.KindInvalid},
		{mapping.ErrInvalidProps, gateway.KindInvalid},
		{gateway.ErrNotFound, gateway.KindNotFound},
		{gateway.ErrAlreadyAcked, gateway.KindNotFound},
		{gateway.ErrTooManyQueues, gateway.KindTooManyQueues},
		{gateway.ErrTooLarge, gateway.KindTooLarge},
		{gateway.ErrHeaderTooLarge, gateway.KindHeaderTooLarge},
		{gateway.ErrUnknown, gateway.KindUnknown},
		{gateway.ErrUnavailable, gateway.KindUnavailable},
		{gateway.ErrBusy, gateway.KindUnavailable},
		{busy, gateway.KindUnavailable},
		{context.Canceled, gateway.KindCanceled},
		{context.DeadlineExceeded, gateway.KindCanceled},
		{errors.New("something else"), gateway.KindInternal},
		// The store's own values are the gateway's.
		{store.ErrNotFound, gateway.KindNotFound},
		{store.ErrUnknown, gateway.KindUnknown},
	}
	for _, s := range sentinels {
		for _, err := range []error{s.err, wrap(s.err), wrap(fmt.Errorf("%w: detail", s.err))} {
			if got := gateway.KindOf(err); got != s.want {
				t.Errorf("KindOf(%q) = %v, want %v", err, got, s.want)
			}
		}
	}
	if got := gateway.KindOf(nil); got != gateway.KindNone {
		t.Errorf("KindOf(nil) = %v, want none", got)
	}

	for _, c := range []struct {
		name string
		err  error
		want gateway.ErrorKind
	}{
		// An invalid name is reported inside ErrInvalid.
		{"invalid name in ErrInvalid", fmt.Errorf("%w: %w", gateway.ErrInvalid, mapping.ErrInvalidName), gateway.KindInvalid},
		{"invalid body read, client canceled", fmt.Errorf("%w: reading body: %w", gateway.ErrInvalid, context.Canceled), gateway.KindInvalid},
		{"invalid before not found", fmt.Errorf("%w: %w", gateway.ErrNotFound, gateway.ErrInvalid), gateway.KindInvalid},
		{"not found before too many queues", fmt.Errorf("%w: %w", gateway.ErrTooManyQueues, gateway.ErrNotFound), gateway.KindNotFound},
		{"too many queues before unavailable", store.Classify("create queue", wrap(gateway.ErrTooManyQueues)), gateway.KindTooManyQueues},
		{"too large before header too large", fmt.Errorf("%w: %w", gateway.ErrHeaderTooLarge, gateway.ErrTooLarge), gateway.KindTooLarge},
		{"header too large before unavailable", fmt.Errorf("%w: %w", gateway.ErrUnavailable, gateway.ErrHeaderTooLarge), gateway.KindHeaderTooLarge},
		// A store's deadline is its unknown outcome, a read's its
		// unavailability: the context says less than the sentinel.
		{"unknown with a deadline", store.Outcome("store message", context.DeadlineExceeded), gateway.KindUnknown},
		{"unknown with a timeout", store.Outcome("ack", nats.ErrTimeout), gateway.KindUnknown},
		{"unavailable with a deadline", store.Classify("peek", context.DeadlineExceeded), gateway.KindUnavailable},
		// An error already wrapping ErrUnknown stays unknown, however it is
		// wrapped again: even beside ErrUnavailable, which would promise
		// that nothing happened.
		{"unknown wrapped twice", wrap(wrap(fmt.Errorf("ack: %w", gateway.ErrUnknown))), gateway.KindUnknown},
		{"unknown classified again", store.Classify("store batch", wrap(store.Outcome("store message", nats.ErrTimeout))), gateway.KindUnknown},
		{"unknown beside unavailable", fmt.Errorf("%w: %w", gateway.ErrUnavailable, fmt.Errorf("ack: %w", gateway.ErrUnknown)), gateway.KindUnknown},
		// A canceled context passes through the store's classification: a
		// client that went away, or a gateway stopping, never a 500.
		{"canceled through Classify", store.Classify("pull", context.Canceled), gateway.KindCanceled},
		{"canceled through Outcome", store.Outcome("store message", wrap(context.Canceled)), gateway.KindCanceled},
		{"canceled wrapped twice", wrap(wrap(context.Canceled)), gateway.KindCanceled},
		{"busy beside a deadline", fmt.Errorf("%w: %w", busy, context.DeadlineExceeded), gateway.KindUnavailable},
	} {
		if got := gateway.KindOf(c.err); got != c.want {
			t.Errorf("%s: KindOf(%q) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestKindClientFault: the kinds a front end answers as the request's fault
// (HTTP's 4xx) and those it answers as the gateway's state.
func TestKindClientFault(t *testing.T) {
	t.Parallel()
	for k := gateway.KindNone; k <= gateway.KindInternal; k++ {
		want := k >= gateway.KindInvalid && k <= gateway.KindHeaderTooLarge
		if got := k.ClientFault(); got != want {
			t.Errorf("%v.ClientFault() = %v, want %v", k, got, want)
		}
	}
}
