// Package leftover retries what deleted queues left behind because the
// store was full when they were deleted (gateway.Queues.DeleteQueue):
// their properties and metadata records, whose removal writes a tombstone.
// One background worker (Set) retries them all until the store has room,
// so that deleting many queues while it is full costs one retry loop, not
// one per queue.
package leftover

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/store"
)

// Kind is what a deleted queue left: a set of these bits.
type Kind uint8

// What a deleted queue may leave.
const (
	Props Kind = 1 << iota // its own properties (Config.DropProps)
	Meta                   // its metadata record (Config.DropMeta)
)

// Retry is how often the worker tries again.
const Retry = 2 * time.Second

// Config is what a Set works with: the core's.
type Config struct {
	// Spawn runs f as the core's background work (false: closing).
	Spawn func(f func(ctx context.Context)) bool
	// Known reports whether a queue exists (again).
	Known func(queue string) bool
	// DropProps and DropMeta remove a queue's properties and metadata.
	DropProps, DropMeta func(ctx context.Context, queue string) error
	// Timeout bounds one removal.
	Timeout time.Duration
	Logger  *slog.Logger
}

// Set is the set of deleted queues with something left, and whether the
// worker runs. Create it with New; it is safe for concurrent use.
type Set struct {
	cfg     Config
	mu      sync.Mutex
	pending map[string]Kind
	running bool
}

// New returns an empty Set.
func New(cfg Config) *Set { return &Set{cfg: cfg} }

// Add records what queue, just deleted, left behind for want of room,
// and starts the worker if it does not run.
func (l *Set) Add(queue string, k Kind) {
	l.mu.Lock()
	if l.pending == nil {
		l.pending = make(map[string]Kind)
	}
	_, had := l.pending[queue]
	l.pending[queue] |= k
	if !l.running && l.cfg.Spawn(l.removeAll) {
		l.running = true
	}
	l.mu.Unlock()
	if !had {
		l.cfg.Logger.Warn("queue deleted, but the store is full: what is left of it (properties, metadata) is removed once space is freed", "queue", queue)
	}
}

// Count is how many deleted queues have something left.
func (l *Set) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// Running reports whether the worker runs.
func (l *Set) Running() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running
}

// removeAll retries the pending removals every Retry until
// none is left or the gateway closes. A removal refused for want of storage
// ends the round (the store is still full: the others would be refused
// too); one that fails otherwise is logged and dropped; a queue that exists
// again is dropped (what is there is the new queue's).
func (l *Set) removeAll(ctx context.Context) {
	t := time.NewTicker(Retry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.mu.Lock()
			l.running = false
			l.mu.Unlock()
			return
		case <-t.C:
		}
		l.mu.Lock()
		queues := slices.Sorted(maps.Keys(l.pending))
		l.mu.Unlock()
		for _, q := range queues {
			if !l.remove(ctx, q) {
				break
			}
		}
		l.mu.Lock()
		if len(l.pending) == 0 {
			l.running = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
	}
}

// remove tries what queue left; false when the store is still full
// (or the gateway closing).
func (l *Set) remove(ctx context.Context, queue string) bool {
	l.mu.Lock()
	k := l.pending[queue]
	l.mu.Unlock()
	done := func(bit Kind) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.pending[queue] &^= bit; l.pending[queue] == 0 {
			delete(l.pending, queue)
		}
	}
	if l.cfg.Known(queue) {
		done(k)
		return true
	}
	for _, step := range []struct {
		bit  Kind
		what string
		drop func(context.Context, string) error
	}{{Props, "properties", l.cfg.DropProps}, {Meta, "metadata", l.cfg.DropMeta}} {
		if k&step.bit == 0 {
			continue
		}
		octx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
		err := step.drop(octx, queue)
		cancel()
		switch {
		case err == nil:
			l.cfg.Logger.Info("removed the "+step.what+" a queue deleted while the store was full left", "queue", queue)
		case ctx.Err() != nil:
			return false
		case store.IsStorageFull(err), errors.Is(err, store.ErrUnavailable):
			return false
		default:
			l.cfg.Logger.Warn("removing the "+step.what+" of a deleted queue failed", "queue", queue, "err", err)
		}
		done(step.bit)
	}
	return true
}
