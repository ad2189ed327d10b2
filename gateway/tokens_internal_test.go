package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/testnats"
)

// TestTokensRevokedStaysRevoked: the bucket's follower lags, so the echo of
// a token's creation may reach it after this gateway revoked the token; it
// must not make the token valid again. The echo is handed to the follower's
// apply directly, as the watcher would.
func TestTokensRevokedStaysRevoked(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ns := testnats.Start(t)
	g, err := New(ctx, testnats.Connect(t, ns, "test"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	ts, err := g.OpenTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	secret, info, err := ts.CreateToken(ctx, TokenSpec{Name: "n", Prefix: "a", Rights: []string{"push"}})
	if err != nil {
		t.Fatal(err)
	}
	created, err := ts.kv.Get(ctx, tokenKeyPrefix+info.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The state in the middle of RevokeToken on this gateway: marked, gone
	// from the cache, the purge stored but not yet applied by the follower,
	// which still has the creation to apply (the bucket's order: creation,
	// then purge).
	ts.mu.Lock()
	ts.revoking[info.ID] = struct{}{}
	ts.mu.Unlock()
	ts.set(info.ID, nil)
	ts.apply(created) // the creation's late echo
	if _, ok := ts.Authenticate(secret); ok {
		t.Fatal("a revoked token is valid again after its creation's late echo")
	}
	ts.apply(entry{key: tokenKeyPrefix + info.ID, rev: created.Revision() + 1, op: jetstream.KeyValuePurge})
	ts.mu.RLock()
	_, marked := ts.revoking[info.ID]
	ts.mu.RUnlock()
	if marked {
		t.Fatal("the purge's echo left the revocation mark")
	}

	// The whole revocation through the bucket: the follower applies the
	// purge, and nothing is kept for the id.
	secret, info, err = ts.CreateToken(ctx, TokenSpec{Name: "m", Prefix: "a", Rights: []string{"push"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.RevokeToken(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	waitUntil(ctx, t, func() bool {
		ts.mu.RLock()
		defer ts.mu.RUnlock()
		_, ok := ts.revoking[info.ID]
		return !ok
	})
	if _, ok := ts.Authenticate(secret); ok {
		t.Fatal("a revoked token is valid")
	}
}
