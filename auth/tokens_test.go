package auth_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testcore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/internal/route"
)

// startStore starts an embedded nats-server, a core on it and the core's
// token store.
func startStore(t testing.TB) (*embedded.Server, *auth.Store) {
	t.Helper()
	ns := testnats.Start(t)
	return ns, openStore(t, ns, "test")
}

// openStore is the token store of a new core on ns.
func openStore(t testing.TB, ns *embedded.Server, name string) *auth.Store {
	t.Helper()
	g := testcore.New(t, testnats.Connect(t, ns, name), gateway.Config{})
	ts, err := auth.Open(t.Context(), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestTokensCreateAuthenticateRevoke(t *testing.T) {
	t.Parallel()
	ns, ts := startStore(t)
	ctx := t.Context()

	tok, info, err := ts.CreateToken(ctx, auth.TokenSpec{Name: "orders", Prefix: "orders.", Rights: []string{"pull", "push", "pull"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, info.ID+".") || strings.Join(info.Rights, ",") != "push,pull" {
		t.Fatalf("token %q, info %+v", tok, info)
	}
	got, ok := ts.Authenticate(tok)
	if !ok || got.Name() != "orders" {
		t.Fatalf("Authenticate(new token) = %v, %v", got, ok)
	}
	if !got.Allows(route.RightPush, "orders.a") || got.Allows(route.RightAdmin, "orders.a") || got.Allows(route.RightPush, "other") || got.Global() {
		t.Errorf("scope or rights wrong: %+v", got.Info())
	}
	for _, bad := range []string{"", tok + "x", info.ID + ".", info.ID, strings.ToUpper(tok), "0123456789abcdef." + strings.SplitN(tok, ".", 2)[1]} {
		if _, ok := ts.Authenticate(bad); ok {
			t.Errorf("Authenticate(%q) accepted", bad)
		}
	}

	// A second gateway on the same NATS loads it, and sees the revocation.
	ts2 := openStore(t, ns, "second")
	if _, ok := ts2.Authenticate(tok); !ok {
		t.Fatal("second gateway does not know the token")
	}
	if err := ts.RevokeToken(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := ts.Authenticate(tok); ok {
		t.Error("revoked token still accepted by the gateway that revoked it")
	}
	testwait.For(t, "the second gateway sees the revocation", func() bool {
		_, ok := ts2.Authenticate(tok)
		return !ok
	})
	if err := ts.RevokeToken(ctx, info.ID); !errors.Is(err, gateway.ErrNotFound) {
		t.Errorf("revoking twice: %v, want ErrNotFound", err)
	}
	if n := len(ts.ListTokens(ctx)); n != 0 {
		t.Errorf("%d tokens listed after the revocation", n)
	}
}

func TestTokensRegexpScopeAndInvalidSpecs(t *testing.T) {
	t.Parallel()
	_, ts := startStore(t)
	ctx := t.Context()
	tok, _, err := ts.CreateToken(ctx, auth.TokenSpec{Name: "ab", Regexp: `q\.(a|b)`, Rights: []string{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	tk, _ := ts.Authenticate(tok)
	for q, want := range map[string]bool{"q.a": true, "q.b": true, "q.ab": false, "xq.a": false, "q.c": false} {
		if tk.InScope(q) != want {
			t.Errorf("InScope(%q) = %v", q, !want)
		}
	}
	for _, spec := range []auth.TokenSpec{
		{Name: "x"},
		{Name: "x", Rights: []string{"fly"}},
		{Name: "", Rights: []string{"push"}},
		{Name: "a*b", Rights: []string{"push"}},
		{Name: strings.Repeat("n", 65), Rights: []string{"push"}},
		{Name: "x", Prefix: "p", Regexp: "r", Rights: []string{"push"}},
		{Name: "x", Regexp: "(", Rights: []string{"push"}},
		{Name: "x", Regexp: strings.Repeat("a", auth.MaxTokenRegexp+1), Rights: []string{"push"}},
		{Name: "x", Regexp: `[a-z]{1000}[0-9]{1000}\w{1000}`, Rights: []string{"push"}},
	} {
		if _, _, err := ts.CreateToken(ctx, spec); !errors.Is(err, gateway.ErrInvalid) {
			t.Errorf("CreateToken(%+v) = %v, want ErrInvalid", spec, err)
		}
	}
}

// Records in the bucket are input: a broken one is ignored, not trusted.
func TestTokensInvalidRecordIgnored(t *testing.T) {
	t.Parallel()
	ns, ts := startStore(t)
	ctx := t.Context()
	js := testnats.JetStream(t, testnats.Connect(t, ns, "writer"))
	kv, err := js.KeyValue(ctx, auth.TokensBucket)
	if err != nil {
		t.Fatal(err)
	}
	good, _, err := ts.CreateToken(ctx, auth.TokenSpec{Name: "good", Rights: []string{"push"}})
	if err != nil {
		t.Fatal(err)
	}
	// The valid record last: once it arrived, the others have been applied.
	for _, kv2 := range [][2]string{
		{"t.0123456789abcdef", "not json"},
		{"t.1123456789abcdef", `{"id":"1123456789abcdef","name":"x","rights":["push"]}`},               // no hash
		{"t.2123456789abcdef", `{"id":"9999999999999999","name":"x","rights":["push"],"sha256":"00"}`}, // id mismatch
		{"t.4123456789abcdef", strings.Repeat("x", 9<<10)},
		{"t.3123456789abcdef", `{"id":"3123456789abcdef","name":"x","rights":["push"],"sha256":"` + strings.Repeat("0", 64) + `"}`}, // valid
	} {
		if _, err := kv.Put(ctx, kv2[0], []byte(kv2[1])); err != nil {
			t.Fatal(err)
		}
	}
	// Wait for the valid one to arrive, then check the others did not.
	testwait.ForDetail(t, "2 tokens listed", func() (bool, string) {
		l := ts.ListTokens(ctx)
		return len(l) >= 2, fmt.Sprintf("%+v", l)
	})
	if l := ts.ListTokens(ctx); len(l) != 2 {
		t.Errorf("tokens: %+v", l)
	}
	if _, ok := ts.Authenticate(good); !ok {
		t.Error("good token refused")
	}
}

// BenchmarkAuthenticate is the CPU cost of checking one request's token (a
// map lookup and a SHA-256 of the secret).
func BenchmarkAuthenticate(b *testing.B) {
	_, ts := startStore(b)
	tok, _, err := ts.CreateToken(context.Background(), auth.TokenSpec{Name: "bench", Prefix: "q", Rights: []string{"push"}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ts.Authenticate(tok); !ok {
			b.Fatal("refused")
		}
	}
}
