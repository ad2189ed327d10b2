package console

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestUnavailableCancelled: a failed read whose client left writes no
// answer (nobody reads it); one cut short by another context is 503. Never
// 500.
func TestUnavailableCancelled(t *testing.T) {
	c := &Console{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, err := range []error{
		context.Canceled,
		fmt.Errorf("queue info: %w", context.DeadlineExceeded),
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		w := httptest.NewRecorder()
		c.unavailable(w, httptest.NewRequest(http.MethodGet, "/ui/api/queues", nil).WithContext(ctx), err)
		if w.Code >= 500 || w.Body.Len() != 0 {
			t.Errorf("unavailable(%v), client gone: %d %q, want nothing written", err, w.Code, w.Body)
		}
		w = httptest.NewRecorder()
		c.unavailable(w, httptest.NewRequest(http.MethodGet, "/ui/api/queues", nil), err)
		if w.Code != http.StatusServiceUnavailable {
			t.Errorf("unavailable(%v): %d, want 503", err, w.Code)
		}
	}
}
