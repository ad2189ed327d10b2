package rpc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/rpc/wire"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// TestErrorStringAnswers pins the string answered for each of the core's
// errors, alone and wrapped twice ("%s" stands for the error's text).
func TestErrorStringAnswers(t *testing.T) {
	t.Parallel()
	c := &conn{log: quietLogger()}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&rpcError{code: "undef", detail: "nope"}, "undef: nope"},
		{gateway.ErrInvalid, "badarg: %s"},
		{fmt.Errorf("%w: %w", gateway.ErrInvalid, mapping.ErrInvalidName), "badarg: %s"},
		{fmt.Errorf("%w: bad props", mapping.ErrInvalidProps), "invalid_props: %s"},
		// Precedence decided once (gateway.KindOf): an invalid name alone
		// was internal_error, invalid beside not found not_found.
		{fmt.Errorf("%w: empty", mapping.ErrInvalidName), "badarg: %s"},
		{fmt.Errorf("%w: %w", gateway.ErrNotFound, gateway.ErrInvalid), "badarg: %s"},
		{fmt.Errorf("%w: %w", gateway.ErrInvalid, mapping.ErrInvalidProps), "invalid_props: %s"},
		{gateway.ErrNotFound, "not_found"},
		{gateway.ErrAlreadyAcked, "not_found"},
		{gateway.ErrTooManyQueues, "too_many_queues: %s"},
		{store.Classify("create queue", gateway.ErrTooManyQueues), "too_many_queues: %s"},
		{gateway.ErrTooLarge, "too_large"},
		{gateway.ErrHeaderTooLarge, "badarg: %s"},
		{gateway.ErrUnavailable, "unavailable"},
		{fmt.Errorf("%w (limit 3); try again", gateway.ErrBusy), "unavailable"},
		{store.Classify("pull", context.DeadlineExceeded), "unavailable"},
		{gateway.ErrUnknown, "unknown: %s"},
		// Unknown outranks unavailable (gateway.KindOf; was "unavailable").
		{fmt.Errorf("%w: %w", gateway.ErrUnavailable, gateway.ErrUnknown), "unknown: %s"},
		{store.Outcome("ack", context.DeadlineExceeded), "unknown: %s"},
		{context.Canceled, "unavailable: request cancelled"},
		{context.DeadlineExceeded, "unavailable: request cancelled"},
		{errAnswerDropped, "unavailable: request cancelled"},
		{errors.New("something else"), "internal_error"},
	} {
		for _, err := range []error{tc.err, fmt.Errorf("b: %w", fmt.Errorf("a: %w", tc.err))} {
			want := tc.want
			if len(want) > 2 && want[len(want)-2:] == "%s" {
				want = want[:len(want)-2] + err.Error()
			}
			if _, isRPC := tc.err.(*rpcError); isRPC {
				want = tc.want // an rpcError answers its own text, however wrapped
			}
			if got := c.errorString(wire.Request{Method: "push"}, err); got != want {
				t.Errorf("errorString(%q) = %q, want %q", err, got, want)
			}
		}
	}
}
