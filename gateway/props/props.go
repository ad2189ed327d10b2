// Package props owns the queues' properties: the KV bucket LMQ_PROPS (each
// queue's own properties under q.<enc>, the default list under "defaults"),
// mirrored in memory by every gateway (Cache), the writes to it, and each
// queue's effective properties resolved from both (mapping.Resolve). What a
// queue is and whether it may be created is the core's: it reserves room for
// a queue before Update writes properties for it.
package props

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/lmq-gateway/lmq-gateway/internal/kvfollow"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

const (
	defaultsKey  = "defaults"
	ownKeyPrefix = "q."
)

// Cache mirrors the LMQ_PROPS bucket in memory. Every gateway watches the
// bucket, so a change made through one is seen by all; the writer also updates
// its cache at once so that a client reads its own write.
//
// It also keeps each used queue's resolved properties (resolved): a push and
// a pull+ack ask for them several times, and resolving runs the default
// list's regexps and copies the properties each time. Every change of a
// queue's own properties or of the default list (local or followed from the
// bucket) empties it, so it never answers with properties older than own
// and defaults; changes are rare next to messages.
type Cache struct {
	open     func(ctx context.Context) (*kv.KV, error)
	kv       *kv.KV
	log      *slog.Logger
	mu       sync.RWMutex
	own      map[string]mapping.Props // by encoded queue name
	defaults mapping.DefaultList
	// f follows the bucket; own writes are noted there (kvfollow).
	f *kvfollow.Follower

	// resolved[queue] is mapping.Resolve(defaults, queue, own[enc]) as of
	// generation gen; at most maxResolved entries (emptied when full).
	resolved map[string]mapping.Effective
	gen      uint64 // counts changes of own and defaults (under mu)

	// onChange, when set, runs after every change (OnChange).
	onChange atomic.Pointer[func()]
}

// OnChange sets f to run after every change of a queue's own properties or
// of the default list, this gateway's writes and followed ones alike (the
// dispatcher's queue control). f must not block.
func (c *Cache) OnChange(f func()) { c.onChange.Store(&f) }

func (c *Cache) changed() {
	if f := c.onChange.Load(); f != nil {
		(*f)()
	}
}

// maxResolved bounds the resolved-properties cache: beyond it the cache is
// emptied and fills again with the queues in use (an entry is ~100 bytes).
const maxResolved = 1 << 16

// New returns the properties of the bucket open returns, mirrored from
// Start to Stop (lifecycle.Service); nothing happens until Start.
func New(open func(ctx context.Context) (*kv.KV, error), log *slog.Logger) *Cache {
	if log == nil {
		log = slog.Default()
	}
	return &Cache{open: open, log: log, own: make(map[string]mapping.Props), resolved: make(map[string]mapping.Effective)}
}

// Start opens the bucket, loads it (ctx bounds the wait) and follows it
// until Stop. The Cache is used only once Start succeeded.
func (c *Cache) Start(ctx context.Context) error {
	bkt, err := c.open(ctx)
	if err != nil {
		return err
	}
	f := kvfollow.New(bkt, c.log, "properties", c.apply, c.replayed)
	if err := f.Start(ctx); err != nil {
		return err
	}
	c.kv, c.f = bkt, f
	return nil
}

// Stop ends following the bucket and waits for the follower.
func (c *Cache) Stop() {
	if c.f != nil {
		c.f.Stop()
	}
}

// replayed forgets cached values the bucket no longer has.
func (c *Cache) replayed(present map[string]bool) {
	defer c.changed()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changedLocked()
	for enc := range c.own {
		if !present[ownKeyPrefix+enc] {
			delete(c.own, enc)
		}
	}
	if !present[defaultsKey] {
		c.defaults = nil
	}
}

func (c *Cache) apply(e kv.Entry) {
	key := e.Key
	deleted := e.Op != kv.OpPut
	defer c.changed()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changedLocked()
	switch {
	case key == defaultsKey:
		if deleted {
			c.defaults = nil
			return
		}
		l, err := mapping.ParseDefaultList(e.Value)
		if err != nil {
			c.log.Warn("ignoring invalid default properties in KV", "err", err)
			return
		}
		c.defaults = l
	case len(key) > len(ownKeyPrefix) && key[:len(ownKeyPrefix)] == ownKeyPrefix:
		enc := key[len(ownKeyPrefix):]
		if deleted {
			delete(c.own, enc)
			return
		}
		p, err := mapping.ParseProps(e.Value)
		if err != nil {
			c.log.Warn("ignoring invalid queue properties in KV", "key", key, "err", err)
			return
		}
		c.own[enc] = p
	}
}

// changedLocked forgets every resolved queue: own or defaults change
// (called under c.mu held for writing, before the change).
func (c *Cache) changedLocked() {
	c.gen++
	clear(c.resolved)
}

// Effective is the queue's resolved properties. The result's Hooks map is
// shared with the cache and other callers: read it, never modify it.
func (c *Cache) Effective(queue string) mapping.Effective {
	c.mu.RLock()
	e, ok := c.resolved[queue]
	gen := c.gen
	if !ok {
		e = mapping.Resolve(c.defaults, queue, c.own[mapping.EncodeName(queue)])
	}
	c.mu.RUnlock()
	if ok {
		return e
	}
	c.mu.Lock()
	// Resolved from own and defaults as of gen: kept only if nothing
	// changed since (a change empties the cache and would not see it).
	if c.gen == gen {
		if len(c.resolved) >= maxResolved {
			clear(c.resolved)
		}
		c.resolved[queue] = e
	}
	c.mu.Unlock()
	return e
}

// Defaults is the default-properties list.
func (c *Cache) Defaults() mapping.DefaultList {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.defaults
}

// Own is a copy of the properties set on the queue itself (without the
// defaults): the console's "where does this value come from".
func (c *Cache) Own(queue string) mapping.Props {
	enc := mapping.EncodeName(queue)
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.own[enc].Merge(mapping.Props{}) // a copy
}

// setLocal applies this gateway's own write of the queue's properties
// before the follower sees it.
func (c *Cache) setLocal(enc string, p mapping.Props, present bool) {
	defer c.changed()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changedLocked()
	if present {
		c.own[enc] = p
	} else {
		delete(c.own, enc)
	}
}

// setDefaultsLocal is setLocal for the default list.
func (c *Cache) setDefaultsLocal(list mapping.DefaultList) {
	defer c.changed()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changedLocked()
	c.defaults = list
}
