package sqs

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/store"
)

// TestAPIErrorOfCancelled: a cancelled context or a deadline that is not the
// client's (ServeHTTP answers nobody when the client left) is the gateway
// stopping or a bound of its own: 503 ServiceUnavailable, never 500.
func TestAPIErrorOfCancelled(t *testing.T) {
	for _, err := range []error{
		context.Canceled,
		fmt.Errorf("read queue metadata: %w", context.Canceled),
		store.Classify("purge queue", context.Canceled),
		fmt.Errorf("queue info: %w", context.DeadlineExceeded),
	} {
		if e := apiErrorOf(err); e.Status != http.StatusServiceUnavailable || e.Code != "ServiceUnavailable" {
			t.Errorf("apiErrorOf(%v) = %d %s, want 503 ServiceUnavailable", err, e.Status, e.Code)
		}
	}
}
