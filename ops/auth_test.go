package ops

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testcore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
)

// tokenOps is Ops with real tokens on an embedded NATS, around handler's
// router.
func tokenOps(t testing.TB) (http.Handler, *auth.Store) {
	t.Helper()
	ns := testnats.Start(t)
	nc := testnats.Connect(t, ns, "ops")
	g := testcore.New(t, nc, gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ts, err := auth.Open(t.Context(), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := New(coreOf(newFakeCore()), NewStats(StatsOptions{}), Options{Tokens: ts, Auth: auth.Credential{BearerToken: "op"}})
	return handler(o, nil), ts
}

func TestTokenAuthorization(t *testing.T) {
	h, ts := tokenOps(t)
	tok, _, err := ts.CreateToken(context.Background(), auth.TokenSpec{Name: "n", Prefix: "a", Rights: []string{"push"}})
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
	tok, _, err := ts.CreateToken(context.Background(), auth.TokenSpec{Name: "n", Prefix: "a", Rights: []string{"push"}})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/messages/a1", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	benchOK(b, h, req)
}

// benchOK serves req with h b.N times, each answered 200.
func benchOK(b *testing.B, h http.Handler, req *http.Request) {
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
	benchOK(b, h, req)
}

// TestCreateTokenWantsJSON: POST /tokens creates nothing from a body a
// plain form of another site could send (text/plain), even with the
// operator's credential.
func TestCreateTokenWantsJSON(t *testing.T) {
	h, ts := tokenOps(t)
	spec := `{"name":"n","rights":["admin"]}`
	post := func(ct string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, auth.PathTokens, strings.NewReader(spec))
		req.Header.Set("Authorization", "Bearer op")
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded"} {
		if w := post(ct); w.Code != http.StatusUnsupportedMediaType {
			t.Errorf("POST /tokens %q: %d %s, want 415", ct, w.Code, w.Body)
		}
	}
	if n := len(ts.ListTokens(context.Background())); n != 0 {
		t.Fatalf("%d tokens after refused creations", n)
	}
	if w := post("application/json; charset=utf-8"); w.Code != http.StatusCreated {
		t.Errorf("POST /tokens JSON: %d %s", w.Code, w.Body)
	}
}

// TestCreateTokenAWSCredentials: POST /tokens answers the AWS credentials
// that sign SQS requests as the new token, so users need not derive them.
func TestCreateTokenAWSCredentials(t *testing.T) {
	h, _ := tokenOps(t)
	req := httptest.NewRequest(http.MethodPost, auth.PathTokens, strings.NewReader(`{"name":"n","rights":["push"]}`))
	req.Header.Set("Authorization", "Bearer op")
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var out auth.CreatedToken
	if err := json.Unmarshal(w.Body.Bytes(), &out); w.Code != http.StatusCreated || err != nil {
		t.Fatalf("POST /tokens: %d %s (%v)", w.Code, w.Body, err)
	}
	id, secret, ok := auth.SigV4Credentials(out.Token)
	if !ok || out.AWSAccessKeyID != id || out.AWSSecretAccessKey != secret || id != out.ID || len(secret) != 64 {
		t.Errorf("POST /tokens answered key id %q secret %q for token %q; want %q %q", out.AWSAccessKeyID, out.AWSSecretAccessKey, out.Token, id, secret)
	}
}
