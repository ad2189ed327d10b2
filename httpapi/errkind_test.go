package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// TestFailAnswers pins what fail answers for each of the core's errors,
// alone and wrapped twice: status, Retry-After, X-Lmq-Delivery-State and
// {"error": text}; and, to a client that has left, the same answer for a
// refusal of the request itself (4xx) and 499 (nothing sent) otherwise.
func TestFailAnswers(t *testing.T) {
	t.Parallel()
	a := &api{log: quiet()}
	for _, c := range []struct {
		err        error
		status     int
		retryAfter string
		state      string
	}{
		{gateway.ErrInvalid, 400, "", ""},
		{fmt.Errorf("%w: %w", gateway.ErrInvalid, mapping.ErrInvalidName), 400, "", ""},
		{fmt.Errorf("%w: bad props", mapping.ErrInvalidProps), 400, "", ""},
		{fmt.Errorf("%w: reading body: %w", gateway.ErrInvalid, context.Canceled), 400, "", ""},
		{gateway.ErrNotFound, 404, "", ""},
		{gateway.ErrAlreadyAcked, 404, "", "acked"},
		{gateway.ErrTooManyQueues, 409, "", ""},
		{store.Classify("create queue", gateway.ErrTooManyQueues), 409, "", ""},
		{gateway.ErrTooLarge, 413, "", ""},
		{gateway.ErrHeaderTooLarge, 431, "", ""},
		{gateway.ErrUnavailable, 503, "1", ""},
		{fmt.Errorf("%w (limit 3); try again", gateway.ErrBusy), 503, "1", ""},
		{store.Classify("peek", context.DeadlineExceeded), 503, "1", ""},
		{gateway.ErrUnknown, 504, "", ""},
		// Unknown outranks unavailable (gateway.KindOf; was 503).
		{fmt.Errorf("%w: %w", gateway.ErrUnavailable, gateway.ErrUnknown), 504, "", ""},
		{store.Outcome("store message", context.DeadlineExceeded), 504, "", ""},
		{context.Canceled, 503, "1", ""},
		{context.DeadlineExceeded, 503, "1", ""},
		{errors.New("something else"), 500, "", ""},
	} {
		for _, err := range []error{c.err, fmt.Errorf("b: %w", fmt.Errorf("a: %w", c.err))} {
			w := httptest.NewRecorder()
			a.fail(w, httptest.NewRequest(http.MethodGet, "/messages/q", nil), err)
			body, _ := json.Marshal(map[string]string{"error": err.Error()})
			if w.Code != c.status || w.Body.String() != string(body) ||
				w.Header().Get("Retry-After") != c.retryAfter || w.Header().Get("X-Lmq-Delivery-State") != c.state {
				t.Errorf("fail(%q): %d %s (Retry-After %q, state %q), want %d %s (%q, %q)", err,
					w.Code, w.Body, w.Header().Get("Retry-After"), w.Header().Get("X-Lmq-Delivery-State"),
					c.status, body, c.retryAfter, c.state)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			w = httptest.NewRecorder()
			a.fail(w, httptest.NewRequest(http.MethodGet, "/messages/q", nil).WithContext(ctx), err)
			want := c.status
			if want >= 500 {
				want = StatusClientClosed
			}
			if w.Code != want {
				t.Errorf("fail(%q), client gone: %d, want %d", err, w.Code, want)
			}
		}
	}
}
