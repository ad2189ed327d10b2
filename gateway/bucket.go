package gateway

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// SharedBucket is a KV bucket every gateway shares, mirrored in memory by
// this gateway for its lifetime: the way a package beside the core (the
// access tokens of package auth) keeps its own bucket without knowing how
// the core follows one.
type SharedBucket struct {
	f *kvFollower
}

// OpenSharedBucket opens the KV bucket name (creating it the first time,
// with this gateway's replicas), replays its current values into apply and
// then follows it until the gateway closes: Close stops the follower and
// waits for it. replayed, when not nil, gets the keys that hold a value at
// the end of each replay, so that the mirror can forget what the bucket
// lost while unwatched. ctx bounds the first replay. Call it before
// serving, not concurrently with Close.
func (g *Gateway) OpenSharedBucket(ctx context.Context, name, description string,
	apply func(jetstream.KeyValueEntry), replayed func(present map[string]bool)) (*SharedBucket, error) {
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
	return &SharedBucket{f: f}, nil
}

// KV is the bucket.
func (b *SharedBucket) KV() jetstream.KeyValue { return b.f.kv }

// Wrote notes this gateway's put of key at revision rev, which the caller
// has already applied to its mirror: the echo of an older write of the key
// is then not applied over it (ownwrites.go).
func (b *SharedBucket) Wrote(key string, rev uint64) { b.f.wrote(key, rev) }

// Removing is to be called before this gateway deletes or purges key; call
// the function it returns with the outcome (ownwrites.go).
func (b *SharedBucket) Removing(key string) (done func(ctx context.Context, ok bool)) {
	return b.f.removing(key)
}
