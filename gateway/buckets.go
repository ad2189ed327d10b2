package gateway

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/kvfollow"
)

// kvFollower is a bucket follower owned by the gateway (Close stops it).
// The wrote/removing spellings are kept for the token store (tokens.go)
// until it leaves the package (issue 26); the others call kvfollow's own.
type kvFollower struct{ *kvfollow.Follower }

func (f *kvFollower) wrote(key string, rev uint64) { f.Wrote(key, rev) }

func (f *kvFollower) removing(key string) func(ctx context.Context, ok bool) {
	return f.Removing(key)
}

// followBucket follows kv (kvfollow.Follow) for the gateway's lifetime:
// Close stops the follower and waits for it.
func (g *Gateway) followBucket(ctx context.Context, kv jetstream.KeyValue, what string,
	apply func(jetstream.KeyValueEntry), replayed func(map[string]bool)) (*kvFollower, error) {
	f, err := kvfollow.Follow(ctx, g.work.Context(), kv, g.log, what, apply, replayed)
	if err != nil {
		return nil, err
	}
	g.followMu.Lock()
	g.followers = append(g.followers, f)
	g.followMu.Unlock()
	return &kvFollower{f}, nil
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

// openBucket opens (creating it the first time, with this gateway's
// replicas) a KV bucket shared by every gateway (kvfollow.OpenBucket).
func (g *Gateway) openBucket(ctx context.Context, name, description string) (jetstream.KeyValue, error) {
	return kvfollow.OpenBucket(ctx, g.js, name, description, g.cfg.Replicas)
}
