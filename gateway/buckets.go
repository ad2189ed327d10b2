package gateway

import (
	"context"
	"fmt"

	"github.com/lmq-gateway/lmq-gateway/internal/kvfollow"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// followBucket follows kv (a kvfollow.Follower, started here) for the
// gateway's lifetime: Close stops the follower and waits for it.
func (g *Gateway) followBucket(ctx context.Context, kv *kv.KV, what string,
	apply func(kv.Entry), replayed func(map[string]bool)) (*kvfollow.Follower, error) {
	f := kvfollow.New(kv, g.log, what, apply, replayed)
	if err := f.Start(ctx); err != nil {
		return nil, err
	}
	g.followMu.Lock()
	g.followers = append(g.followers, f)
	g.followMu.Unlock()
	return f, nil
}

// stopFollowers stops every follower started by Gateway.followBucket.
func (g *Gateway) stopFollowers() {
	g.followMu.Lock()
	fs := g.followers
	g.followers = nil
	g.followMu.Unlock()
	for _, f := range fs {
		f.Stop()
	}
}

// openBucket opens a KV bucket shared by every gateway, creating it the
// first time with this gateway's replicas (kv.CreateOnce).
func (g *Gateway) openBucket(ctx context.Context, name, description string) (*kv.KV, error) {
	return g.store.OpenKV(ctx, kv.Config{
		Bucket:      name,
		Description: description,
		Replicas:    g.cfg.Replicas,
		Create:      kv.CreateOnce,
	})
}

// SharedBucket is a KV bucket every gateway shares, mirrored in memory by
// this gateway for its lifetime: the way a package beside the core (the
// access tokens of package auth) keeps its own bucket without knowing how
// the core follows one.
type SharedBucket struct {
	kv *kv.KV
	f  *kvfollow.Follower
}

// OpenSharedBucket opens the KV bucket name (creating it the first time,
// with this gateway's replicas), replays its current values into apply and
// then follows it until the gateway closes: Close stops the follower and
// waits for it. replayed, when not nil, gets the keys that hold a value at
// the end of each replay, so that the mirror can forget what the bucket
// lost while unwatched. ctx bounds the first replay. Call it before
// serving, not concurrently with Close.
func (g *Gateway) OpenSharedBucket(ctx context.Context, name, description string,
	apply func(kv.Entry), replayed func(present map[string]bool)) (*SharedBucket, error) {
	select {
	case <-g.closing:
		return nil, fmt.Errorf("open %s: %w: the gateway is stopping", name, ErrUnavailable)
	default:
	}
	kv, err := g.openBucket(ctx, name, description)
	if err != nil {
		return nil, jsErr("open "+name, err)
	}
	f, err := g.followBucket(ctx, kv, name, apply, replayed)
	if err != nil {
		return nil, err
	}
	return &SharedBucket{kv: kv, f: f}, nil
}

// KV is the bucket.
func (b *SharedBucket) KV() *kv.KV { return b.kv }

// Wrote notes this gateway's put of key at revision rev, which the caller
// has already applied to its mirror: the echo of an older write of the key
// is then not applied over it (kvfollow).
func (b *SharedBucket) Wrote(key string, rev uint64) { b.f.Wrote(key, rev) }

// Removing is to be called before this gateway deletes or purges key; call
// the function it returns with the outcome (kvfollow).
func (b *SharedBucket) Removing(key string) (done func(ctx context.Context, ok bool)) {
	return b.f.Removing(key)
}
