package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/internal/route"
)

// TestAbandonedPullIs499: a pull whose client left before any answer is
// logged and counted as 499 (nginx's "client closed request"), whether the
// handler said so (httpapi writes 499) or wrote nothing at all, and not as
// an empty 200; a handler that writes nothing for a client still there
// keeps net/http's 200.
func TestAbandonedPullIs499(t *testing.T) {
	var buf bytes.Buffer
	o := New(coreOf(newFakeCore()), NewStats(StatsOptions{}), Options{Logger: slog.New(slog.NewJSONHandler(&buf, nil)), AccessLog: true})
	r := route.NewTable()
	r.HandleFunc("/messages/{name}", route.OnQueue(route.RightPull), func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // a long-poll until the client leaves
		if r.URL.Query().Get("say") != "" {
			w.WriteHeader(statusClientClosed)
		}
	}, http.MethodGet)
	r.HandleFunc("/silent", route.Authenticated, func(http.ResponseWriter, *http.Request) {}, http.MethodGet)
	o.Mount(r)
	h := o.Middleware(r)

	for _, path := range []string{"/messages/q", "/messages/q?say=1"} {
		buf.Reset()
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the client has gone
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil).WithContext(ctx))
		var rec map[string]any
		if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
			t.Fatalf("%s: access log line %q: %v", path, buf.String(), err)
		}
		if rec["status"] != 499.0 || rec["bytes"] != 0.0 {
			t.Errorf("%s: abandoned pull logged as %v", path, rec)
		}
	}
	buf.Reset()
	get(t, h, "/silent")
	if !strings.Contains(buf.String(), `"status":200`) {
		t.Errorf("empty answer to a present client logged as %s", buf.String())
	}

	body := get(t, h, "/metrics").Body.String()
	for _, want := range []string{
		`lmq_http_request_duration_seconds_count{code="499",method="GET",route="/messages/{name}"} 2`,
		`lmq_http_request_duration_seconds_count{code="200",method="GET",route="/silent"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, `code="200",method="GET",route="/messages/{name}"`) {
		t.Errorf("an abandoned pull was counted as a 200 pull:\n%s", body)
	}
}
