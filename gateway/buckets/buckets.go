// Package buckets follows the KV buckets every gateway shares beside the
// core's own (auth's tokens): Followers starts a follower per bucket and
// stops them all with the core, and Shared is what the opener gets back
// (gateway.SharedBucket).
package buckets

import (
	"context"
	"log/slog"
	"sync"

	"github.com/lmq-gateway/lmq-gateway/internal/kvfollow"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// Followers are the followers of the shared buckets, started by Follow and
// stopped together by Stop. The zero value is not usable; create it with
// New.
type Followers struct {
	log *slog.Logger
	mu  sync.Mutex
	fs  []*kvfollow.Follower
}

// New returns an empty set of followers logging to log.
func New(log *slog.Logger) *Followers { return &Followers{log: log} }

// Follow follows kv (a kvfollow.Follower, started here) until Stop, and
// returns it as a Shared bucket.
func (s *Followers) Follow(ctx context.Context, kv *kv.KV, what string,
	apply func(kv.Entry), replayed func(map[string]bool)) (*Shared, error) {
	f := kvfollow.New(kv, s.log, what, apply, replayed)
	if err := f.Start(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.fs = append(s.fs, f)
	s.mu.Unlock()
	return &Shared{kv: kv, f: f}, nil
}

// Stop stops every follower started by Follow, and waits for them.
func (s *Followers) Stop() {
	s.mu.Lock()
	fs := s.fs
	s.fs = nil
	s.mu.Unlock()
	for _, f := range fs {
		f.Stop()
	}
}

// Shared is a KV bucket every gateway shares, mirrored in memory by
// this gateway for its lifetime: the way a package beside the core (the
// access tokens of package auth) keeps its own bucket without knowing how
// the core follows one.
type Shared struct {
	kv *kv.KV
	f  *kvfollow.Follower
}

// KV is the bucket.
func (b *Shared) KV() *kv.KV { return b.kv }

// Wrote notes this gateway's put of key at revision rev, which the caller
// has already applied to its mirror: the echo of an older write of the key
// is then not applied over it (kvfollow).
func (b *Shared) Wrote(key string, rev uint64) { b.f.Wrote(key, rev) }

// Removing is to be called before this gateway deletes or purges key; call
// the function it returns with the outcome (kvfollow).
func (b *Shared) Removing(key string) (done func(ctx context.Context, ok bool)) {
	return b.f.Removing(key)
}
