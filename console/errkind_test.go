package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// TestUnavailableAnswers pins the console API's answer for each of the
// core's errors, alone and wrapped twice: 404, 400, or 503 with Retry-After
// for whatever keeps the console from reading.
func TestUnavailableAnswers(t *testing.T) {
	t.Parallel()
	c := &Console{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, tc := range []struct {
		err    error
		status int
	}{
		{gateway.ErrNotFound, 404},
		{gateway.ErrAlreadyAcked, 404},
		{gateway.ErrInvalid, 400},
		{mapping.ErrInvalidName, 400},
		// Invalid properties are a bad request too (gateway.KindOf; was 503).
		{mapping.ErrInvalidProps, 400},
		{gateway.ErrTooManyQueues, 503},
		{gateway.ErrTooLarge, 503},
		{gateway.ErrHeaderTooLarge, 503},
		{gateway.ErrUnavailable, 503},
		{store.Classify("queue info", context.DeadlineExceeded), 503},
		{gateway.ErrUnknown, 503},
		{context.Canceled, 503},
		{errors.New("something else"), 503},
	} {
		for _, err := range []error{tc.err, fmt.Errorf("b: %w", fmt.Errorf("a: %w", tc.err))} {
			w := httptest.NewRecorder()
			c.unavailable(w, httptest.NewRequest(http.MethodGet, "/ui/api/queue?name=q", nil), err)
			retry := ""
			if tc.status == 503 {
				retry = "1"
			}
			if w.Code != tc.status || w.Header().Get("Retry-After") != retry {
				t.Errorf("unavailable(%q): %d (Retry-After %q), want %d (%q)", err, w.Code, w.Header().Get("Retry-After"), tc.status, retry)
			}
		}
	}
}
