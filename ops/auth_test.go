package ops

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/testnats"
)

func TestRedactQuery(t *testing.T) {
	for raw, want := range map[string]string{
		"":                      "",
		"t=0":                   "t=0",
		"token=abc.def":         "token=REDACTED",
		"t=0&token=abc&x=1":     "t=0&token=REDACTED&x=1",
		"tok%65n=abc":           "tok%65n=REDACTED",
		"tokens=3&mytoken=a":    "tokens=3&mytoken=a",
		"token=a&token=b":       "token=REDACTED&token=REDACTED",
		"qre=token&token=s3cr":  "qre=token&token=REDACTED",
		"token":                 "token=REDACTED",
		"token=%zz&t=1;token=x": "token=REDACTED&t=1;token=x",
	} {
		if got := redactQuery(raw); got != want {
			t.Errorf("redactQuery(%q) = %q, want %q", raw, got, want)
		}
	}
}

// tokenOps is Ops with real tokens on an embedded NATS, around handler's
// router.
func tokenOps(t testing.TB) (http.Handler, *gateway.Tokens) {
	t.Helper()
	ns := testnats.Start(t)
	nc := testnats.Connect(t, ns, "ops")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := gateway.New(ctx, nc, gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	ts, err := g.OpenTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	o := New(newFakeCore(), NewStats(StatsOptions{}), Options{Tokens: ts, Auth: Auth{BearerToken: "op"}})
	return handler(o, nil), ts
}

func TestTokenAuthorization(t *testing.T) {
	h, ts := tokenOps(t)
	tok, _, err := ts.CreateToken(context.Background(), gateway.TokenSpec{Name: "n", Prefix: "a", Rights: []string{"push"}})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path string, hdr ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader("x"))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	if w := do("POST", "/messages/a1", "Authorization", "Bearer "+tok); w.Code != http.StatusOK {
		t.Errorf("push in scope: %d %s", w.Code, w.Body)
	}
	if w := do("POST", "/messages/b1?token="+tok); w.Code != http.StatusForbidden || w.Body.String() != "token lacks \"push\" on queue \"b1\"\n" {
		t.Errorf("push out of scope: %d %q", w.Code, w.Body)
	}
	if w := do("GET", "/messages/a1", "Authorization", "Bearer "+tok); w.Code != http.StatusForbidden {
		t.Errorf("pull without the right: %d", w.Code)
	}
	if w := do("GET", "/messages/b1", "Authorization", "Bearer op"); w.Code != http.StatusNoContent {
		t.Errorf("operator: %d", w.Code)
	}
	if w := do("GET", "/stats"); w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("no credential: %d", w.Code)
	}
	if w := do("GET", "/healthz"); w.Code != http.StatusOK {
		t.Errorf("/healthz: %d", w.Code)
	}
}

// BenchmarkTokenRequest is the middleware's cost of one authenticated,
// authorized request (token lookup, hash, scope check, metrics), on a
// handler that does nothing.
func BenchmarkTokenRequest(b *testing.B) {
	h, ts := tokenOps(b)
	tok, _, err := ts.CreateToken(context.Background(), gateway.TokenSpec{Name: "n", Prefix: "a", Rights: []string{"push"}})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/messages/a1", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}

// BenchmarkOperatorRequest is the same request with the single
// --auth-token, for comparison.
func BenchmarkOperatorRequest(b *testing.B) {
	h, _ := tokenOps(b)
	req := httptest.NewRequest("POST", "/messages/a1", nil)
	req.Header.Set("Authorization", "Bearer op")
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}
