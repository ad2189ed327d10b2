package auth

import (
	"testing"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testcore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// TestTokensRevokedStaysRevoked: a revocation that fails leaves the token
// valid (it is read back from the bucket), and one that succeeds is not
// undone when the bucket's follower, which lags, applies the creation and
// the purge after it. (That the follower skips the late echo of a creation
// is gateway's TestOwnWritesSkipOlderEchoes.)
func TestTokensRevokedStaysRevoked(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := testnats.Start(t)
	g := testcore.New(t, testnats.Connect(t, ns, "test"), gateway.Config{})
	ts, err := Open(ctx, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	secret, info, err := ts.CreateToken(ctx, TokenSpec{Name: "n", Prefix: "a", Rights: []string{"push"}})
	if err != nil {
		t.Fatal(err)
	}
	// A revocation that failed: the token is read back (valid).
	ts.set(info.ID, nil)
	ts.b.Removing(tokenKeyPrefix+info.ID)(ctx, false)
	if _, ok := ts.Authenticate(secret); !ok {
		t.Fatal("a token whose revocation failed is not valid")
	}

	// The whole revocation through the bucket.
	if err := ts.RevokeToken(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	// A token written after the revocation by someone else: once the
	// follower applied it, it has applied the creation and the purge
	// before it (the bucket delivers in order).
	kv := testnats.JetStream(t, testnats.Connect(t, ns, "writer"))
	bucket, err := kv.KeyValue(ctx, TokensBucket)
	if err != nil {
		t.Fatal(err)
	}
	const later = "3123456789abcdef"
	rec := `{"id":"` + later + `","name":"later","rights":["push"],"sha256":"` + zeroHash + `"}`
	if _, err := bucket.Put(ctx, tokenKeyPrefix+later, []byte(rec)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the follower applied the later token", func() bool {
		_, ok := ts.Token(later)
		return ok
	})
	if _, ok := ts.Authenticate(secret); ok {
		t.Fatal("a revoked token is valid")
	}
	if _, ok := ts.Token(info.ID); ok {
		t.Fatal("a revoked token is listed")
	}
}

const zeroHash = "0000000000000000000000000000000000000000000000000000000000000000"
