package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestFailCancelled: a cancelled context is never a 500. The client's own
// (it left) is recorded as 499 with nothing logged as a failure; another one
// (the gateway stopping, a bound of its own) is 503 with Retry-After.
func TestFailCancelled(t *testing.T) {
	a := &api{log: quiet()}
	for _, err := range []error{
		context.Canceled,
		fmt.Errorf("read queue metadata: %w", context.Canceled),
		fmt.Errorf("peek: %w", context.DeadlineExceeded),
	} {
		w := httptest.NewRecorder()
		a.fail(w, httptest.NewRequest(http.MethodGet, "/messages/q", nil), err)
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Errorf("fail(%v), client still there: %d (Retry-After %q), want 503 with Retry-After", err, w.Code, w.Header().Get("Retry-After"))
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		w = httptest.NewRecorder()
		a.fail(w, httptest.NewRequest(http.MethodGet, "/messages/q", nil).WithContext(ctx), err)
		if w.Code != StatusClientClosed {
			t.Errorf("fail(%v), client gone: %d, want %d", err, w.Code, StatusClientClosed)
		}
	}
}
