package gateway

import (
	"context"
	"fmt"

	"github.com/lmq-gateway/lmq-gateway/gateway/buckets"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// openBucket opens a KV bucket shared by every gateway, creating it the
// first time with this gateway's replicas (kv.CreateOnce).
func (g *core) openBucket(ctx context.Context, name, description string) (*kv.KV, error) {
	return g.store.OpenKV(ctx, kv.Config{
		Bucket:      name,
		Description: description,
		Replicas:    g.cfg.Replicas,
		Create:      kv.CreateOnce,
	})
}

// SharedBucket is a KV bucket every gateway shares, mirrored in memory by
// this gateway for its lifetime (buckets.Shared): the way a package beside
// the core (the access tokens of package auth) keeps its own bucket
// without knowing how the core follows one.
type SharedBucket = buckets.Shared

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
	return g.followers.Follow(ctx, kv, name, apply, replayed)
}
