// Package registry knows which queues exist, across every gateway on one
// JetStream: a queue exists while its key is in the KV bucket LMQ_QUEUES
// (mapping.QueuesBucket), and a Registry is this gateway's mirror of that
// bucket, followed with internal/kvfollow. It creates a queue (its shard
// stream through package store, then its key), bounds how many exist
// (Config.MaxQueues), deletes a queue's key, lists and matches names, and at
// Start registers queues found holding messages without a key (adopt.go).
//
// It owns names only: what a gateway keeps per queue (its dispatcher, its
// waiting clients) is the core's, told by Config.OnDrop when a queue stops
// existing.
package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/lmq-gateway/lmq-gateway/internal/kvfollow"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// ErrTooManyQueues: the request would create a queue while Config.MaxQueues
// exist (gateway.ErrTooManyQueues is this value).
var ErrTooManyQueues = errors.New("too many queues")

// Config is what a Registry needs.
type Config struct {
	// Store opens the bucket, makes a queue's shard stream and finds
	// queues to adopt.
	Store *store.Store
	// Replicas of the bucket, when this gateway is the first to make it.
	Replicas int
	// MaxQueues bounds the queues that exist (Reserve); 0: no bound.
	MaxQueues int
	Logger    *slog.Logger
	// OnDrop, when set, is called when a queue stops existing (deleted here
	// or by another gateway, lost from the bucket, or forgotten). It runs
	// with the registry's lock held, so that no IfKnown runs between the
	// queue leaving the mirror and the caller's cleanup; it must not call
	// the Registry. What it returns, when not nil, runs after the lock is
	// released: the slow part of the cleanup.
	OnDrop func(queue string) (after func())
}

// Registry is this gateway's mirror of the queue registry.
type Registry struct {
	cfg Config
	kv  *kv.KV
	f   *kvfollow.Follower // follows kv; own writes are noted there (kvfollow)

	mu      sync.Mutex
	known   map[string]string // encoded name → queue name, every existing queue
	pending map[string]int    // encoded name → reservations of a queue being created (Reserve)
}

// New returns the registry of cfg; nothing happens until Start.
func New(cfg Config) *Registry {
	return &Registry{
		cfg:     cfg,
		known:   make(map[string]string),
		pending: make(map[string]int),
	}
}

// Start opens the registry bucket (creating it the first time), replays it
// and follows it until Stop, then adopts the queues that hold messages
// without a key (lifecycle.Service). ctx bounds the start. The Registry is
// used only once Start succeeded.
func (r *Registry) Start(ctx context.Context) error {
	bkt, err := r.cfg.Store.OpenKV(ctx, kv.Config{
		Bucket:      mapping.QueuesBucket,
		Description: "lmq-gateway queues: a queue exists while its key does",
		Replicas:    r.cfg.Replicas,
		Create:      kv.CreateOnce,
	})
	if err != nil {
		return fmt.Errorf("queue registry: %w", err)
	}
	f := kvfollow.New(bkt, r.cfg.Logger, "queue registry", r.apply, r.replayed)
	r.kv, r.f = bkt, f
	if err := f.Start(ctx); err != nil {
		return err
	}
	if err := r.adopt(ctx); err != nil {
		f.Stop()
		return err
	}
	return nil
}

// Stop ends following the bucket and waits for the follower
// (lifecycle.Service).
func (r *Registry) Stop() {
	if r.f != nil {
		r.f.Stop()
	}
}

// apply follows one change of the registry bucket.
func (r *Registry) apply(e kv.Entry) {
	enc := e.Key
	name, ok := mapping.DecodeName(enc)
	if !ok {
		return // not a key of ours
	}
	if e.Op == kv.OpPut {
		r.addKnown(enc, name)
		return
	}
	r.drop(enc)
}

// replayed forgets queues the bucket lost while the watch was down.
func (r *Registry) replayed(present map[string]bool) {
	r.mu.Lock()
	var gone []string
	for enc := range r.known {
		if !present[enc] {
			gone = append(gone, enc)
		}
	}
	r.mu.Unlock()
	for _, enc := range gone {
		r.drop(enc)
	}
}

// drop forgets a deleted queue and has the caller end what it keeps for
// it (Config.OnDrop).
func (r *Registry) drop(enc string) {
	r.mu.Lock()
	name, ok := r.known[enc]
	delete(r.known, enc)
	var after func()
	if ok && r.cfg.OnDrop != nil {
		after = r.cfg.OnDrop(name)
	}
	r.mu.Unlock()
	if after != nil {
		after()
	}
}

func (r *Registry) addKnown(enc, name string) {
	r.mu.Lock()
	r.known[enc] = name
	r.mu.Unlock()
}

// Forget drops a queue that turned out not to exist from the mirror (the
// bucket is not written).
func (r *Registry) Forget(queue string) { r.drop(mapping.EncodeName(queue)) }

// Known reports whether the mirror has the queue.
func (r *Registry) Known(queue string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.known[mapping.EncodeName(queue)]
	return ok
}

// IfKnown runs fn, with the registry's lock held, if the mirror has the
// queue, and reports whether it did: a caller recording per-queue state in
// fn cannot miss the queue's Config.OnDrop. fn must not call the Registry.
func (r *Registry) IfKnown(queue string, fn func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.known[mapping.EncodeName(queue)]; !ok {
		return false
	}
	fn()
	return true
}

// Name is the name of the known queue whose encoded name is enc.
func (r *Registry) Name(enc string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name, ok := r.known[enc]
	return name, ok
}

// Exists reports whether the queue exists: known here, or registered by
// another gateway a moment ago (its key is read to be sure).
func (r *Registry) Exists(ctx context.Context, queue string) (bool, error) {
	if r.Known(queue) {
		return true, nil
	}
	enc := mapping.EncodeName(queue)
	_, err := r.kv.Get(ctx, enc)
	if errors.Is(err, kv.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, store.Classify("queue registry", err)
	}
	r.addKnown(enc, queue)
	return true, nil
}

// KeyGone reports whether the bucket, read now, has no key for the queue;
// a failed read answers false (the queue is taken to exist).
func (r *Registry) KeyGone(ctx context.Context, queue string) bool {
	_, err := r.kv.Get(ctx, mapping.EncodeName(queue))
	return errors.Is(err, kv.ErrKeyNotFound)
}

// Register makes the queue exist: its shard stream and its registry key.
// The key is written before any message can be, so that no stored message
// belongs to a queue nobody knows. It takes no place within MaxQueues: a
// caller creating a queue reserves one first (Reserve).
func (r *Registry) Register(ctx context.Context, queue string) error {
	if r.Known(queue) {
		return nil
	}
	if _, err := r.cfg.Store.Shards().QueueShard(ctx, queue); err != nil {
		return err
	}
	enc := mapping.EncodeName(queue)
	rev, err := r.kv.Create(ctx, enc, []byte(queue))
	if err != nil && !errors.Is(err, kv.ErrKeyExists) {
		return store.Classify("create queue", err)
	}
	if err == nil {
		r.f.Wrote(enc, rev)
	}
	r.addKnown(enc, queue)
	return nil
}

// Reserve makes room within Config.MaxQueues for creating queue, for a
// caller about to register it; release (never nil) ends the reservation, to
// be called once the queue is registered (it then counts as known) or was
// not. A queue that exists needs no room. Reservations of one name share a
// place, so a caller holding one may still create the queue through another
// path that reserves too.
//
// The count is this gateway's mirror of the registry bucket, which every
// gateway on the JetStream shares, plus the queues being created here, so
// the bound is exact on one gateway. Another gateway's new queue reaches the
// mirror a moment later (the bucket's watch, milliseconds): gateways
// creating queues at the same moment may each take the places they saw free,
// and together pass the bound by those; it then refuses new queues until
// enough are deleted. Queues adopted at the start (holding messages without
// a key) are registered without a place: refusing them would strand their
// messages.
func (r *Registry) Reserve(ctx context.Context, queue string) (release func(), err error) {
	limit := r.cfg.MaxQueues
	if limit <= 0 {
		return func() {}, nil
	}
	enc := mapping.EncodeName(queue)
	r.mu.Lock()
	_, known := r.known[enc]
	count := r.countLocked()
	full := !known && r.pending[enc] == 0 && count >= limit
	if !known && !full {
		r.pending[enc]++
	}
	r.mu.Unlock()
	switch {
	case known:
		return func() {}, nil
	case !full:
		var once sync.Once
		return func() {
			once.Do(func() {
				r.mu.Lock()
				defer r.mu.Unlock()
				if r.pending[enc]--; r.pending[enc] <= 0 {
					delete(r.pending, enc)
				}
			})
		}, nil
	}
	// Full, unless another gateway made this very queue a moment ago.
	ok, err := r.Exists(ctx, queue)
	if err != nil {
		return nil, err
	}
	if ok {
		return func() {}, nil
	}
	return nil, fmt.Errorf("%w: queue %q not created: %d queues exist and the max-queues limit is %d; delete a queue or raise the limit",
		ErrTooManyQueues, queue, count, limit)
}

// Count is the number of queues that exist or are being created here.
func (r *Registry) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.countLocked()
}

func (r *Registry) countLocked() int {
	n := len(r.known)
	for enc := range r.pending {
		if _, ok := r.known[enc]; !ok {
			n++
		}
	}
	return n
}

// Delete deletes the queue's registry key at the revision it reads, marked
// as this gateway's own write, and forgets the queue; store.ErrNotFound
// when there is no key. The bucket itself, not this gateway's mirror of it,
// says whether the queue exists: a deletion through another gateway a
// moment ago must answer not found here too. Deleting at the revision read
// makes two deletions at once succeed once.
func (r *Registry) Delete(ctx context.Context, queue string) error {
	if err := r.deleteKey(ctx, queue, mapping.EncodeName(queue)); err != nil {
		return err
	}
	r.Forget(queue)
	return nil
}

func (r *Registry) deleteKey(ctx context.Context, queue, enc string) (err error) {
	done := r.f.Removing(enc)
	defer func() { done(ctx, err == nil) }()
	for attempt := 0; ; attempt++ {
		e, err := r.kv.Get(ctx, enc)
		if errors.Is(err, kv.ErrKeyNotFound) {
			r.Forget(queue)
			return fmt.Errorf("queue %q: %w", queue, store.ErrNotFound)
		}
		if err != nil {
			return store.Classify("delete queue", err)
		}
		err = r.kv.Delete(ctx, enc, kv.LastRevision(e.Revision))
		if err == nil {
			return nil
		}
		// A conflict: the key changed since it was read.
		if attempt >= 3 || !errors.Is(err, kv.ErrRevisionMismatch) {
			return store.Classify("delete queue", err)
		}
	}
}

// Matching returns the existing queues for which match is true, sorted.
// match runs with the registry's lock held and must not call the Registry.
func (r *Registry) Matching(match func(queue string) bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, name := range r.known {
		if match(name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Names returns every existing queue, sorted.
func (r *Registry) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.known))
	for _, n := range r.known {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
