package gateway

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/store"
)

// What a deleted queue left behind because the store was full when it was
// deleted (DeleteQueue): its properties and metadata records, whose removal
// writes a tombstone. One background worker of the gateway retries them all
// until the store has room, so that deleting many queues while it is full
// costs one retry loop, not one per queue.

// leftKind is what a deleted queue left: a set of these bits.
type leftKind uint8

const (
	leftProps leftKind = 1 << iota // its own properties (dropOwnProps)
	leftMeta                       // its metadata record (meta.Records.Drop)
)

// leftoverRetry is how often the worker tries again.
const leftoverRetry = 2 * time.Second

// leftovers is the set of deleted queues with something left, and whether
// the worker runs.
type leftovers struct {
	mu      sync.Mutex
	pending map[string]leftKind
	running bool
}

// leftover records what queue, just deleted, left behind for want of room,
// and starts the worker if it does not run.
func (g *core) leftover(queue string, k leftKind) {
	l := &g.left
	l.mu.Lock()
	if l.pending == nil {
		l.pending = make(map[string]leftKind)
	}
	_, had := l.pending[queue]
	l.pending[queue] |= k
	if !l.running && g.spawn(g.removeLeftovers) {
		l.running = true
	}
	l.mu.Unlock()
	if !had {
		g.log.Warn("queue deleted, but the store is full: what is left of it (properties, metadata) is removed once space is freed", "queue", queue)
	}
}

// leftoverCount is how many deleted queues have something left.
func (g *core) leftoverCount() int {
	g.left.mu.Lock()
	defer g.left.mu.Unlock()
	return len(g.left.pending)
}

// removeLeftovers retries the pending removals every leftoverRetry until
// none is left or the gateway closes. A removal refused for want of storage
// ends the round (the store is still full: the others would be refused
// too); one that fails otherwise is logged and dropped; a queue that exists
// again is dropped (what is there is the new queue's).
func (g *core) removeLeftovers(ctx context.Context) {
	l := &g.left
	t := time.NewTicker(leftoverRetry)
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
			if !g.removeLeftover(ctx, q) {
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

// removeLeftover tries what queue left; false when the store is still full
// (or the gateway closing).
func (g *core) removeLeftover(ctx context.Context, queue string) bool {
	l := &g.left
	l.mu.Lock()
	k := l.pending[queue]
	l.mu.Unlock()
	done := func(bit leftKind) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.pending[queue] &^= bit; l.pending[queue] == 0 {
			delete(l.pending, queue)
		}
	}
	if g.reg.Known(queue) {
		done(k)
		return true
	}
	for _, step := range []struct {
		bit  leftKind
		what string
		drop func(context.Context, string) error
	}{{leftProps, "properties", g.dropOwnProps}, {leftMeta, "metadata", g.meta.Drop}} {
		if k&step.bit == 0 {
			continue
		}
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		err := step.drop(octx, queue)
		cancel()
		switch {
		case err == nil:
			g.log.Info("removed the "+step.what+" a queue deleted while the store was full left", "queue", queue)
		case ctx.Err() != nil:
			return false
		case store.IsStorageFull(err), errors.Is(err, ErrUnavailable):
			return false
		default:
			g.log.Warn("removing the "+step.what+" of a deleted queue failed", "queue", queue, "err", err)
		}
		done(step.bit)
	}
	return true
}
