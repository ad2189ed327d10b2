package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/testnats"
	"github.com/lmq-gateway/lmq-gateway/internal/testwait"
)

// TestTokensRevokedStaysRevoked: the bucket's follower lags, so the echo of
// a token's creation may reach it after this gateway revoked the token; it
// must not make the token valid again. A revocation that fails leaves the
// token valid.
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
	key := tokenKeyPrefix + info.ID
	created, err := ts.kv.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// A revocation that failed: the token is read back (valid).
	ts.set(info.ID, nil)
	ts.f.removing(key)(ctx, false)
	if _, ok := ts.Authenticate(secret); !ok {
		t.Fatal("a token whose revocation failed is not valid")
	}
	// The middle of RevokeToken: marked, purged, gone from the cache; the
	// follower still has the creation to apply (the bucket's order:
	// creation, then purge), as the watcher hands it over.
	done := ts.f.removing(key)
	ts.set(info.ID, nil)
	ts.f.Offer(created)
	if _, ok := ts.Authenticate(secret); ok {
		t.Fatal("a revoked token is valid again after its creation's late echo")
	}
	// The purge itself: its echo ends the mark (waited for below).
	if err := ts.kv.Purge(ctx, key); err != nil {
		t.Fatal(err)
	}
	done(ctx, true)

	// The whole revocation through the bucket: nothing is kept once the
	// follower applied the purge.
	secret, info, err = ts.CreateToken(ctx, TokenSpec{Name: "m", Prefix: "a", Rights: []string{"push"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.RevokeToken(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the follower applied the purge", func() bool {
		return ts.f.Pending() == 0
	})
	if _, ok := ts.Authenticate(secret); ok {
		t.Fatal("a revoked token is valid")
	}
}
