package rpc

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/rpc/wire"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// TestErrorStringCancelled: a cancelled context or a deadline is answered
// "unavailable", never "internal_error" (RPC's 500).
func TestErrorStringCancelled(t *testing.T) {
	c := &conn{log: quietLogger()}
	for _, err := range []error{
		context.Canceled,
		fmt.Errorf("read queue metadata: %w", context.Canceled),
		store.Classify("pull", context.Canceled),
		fmt.Errorf("peek: %w", context.DeadlineExceeded),
		store.Classify("pull", context.DeadlineExceeded),
	} {
		if got := c.errorString(wire.Request{Method: "pull"}, err); !strings.HasPrefix(got, "unavailable") {
			t.Errorf("errorString(%v) = %q, want unavailable", err, got)
		}
	}
}
