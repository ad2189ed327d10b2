package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/kvfollow"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

const (
	defaultsKey  = "defaults"
	ownKeyPrefix = "q."
)

// propCache mirrors the LMQ_PROPS bucket in memory. Every gateway watches the
// bucket, so a change made through one is seen by all; the writer also updates
// its cache at once so that a client reads its own write.
//
// It also keeps each used queue's resolved properties (resolved): a push and
// a pull+ack ask for them several times, and resolving runs the default
// list's regexps and copies the properties each time. Every change of a
// queue's own properties or of the default list (local or followed from the
// bucket) empties it, so it never answers with properties older than own
// and defaults; changes are rare next to messages.
type propCache struct {
	kv       jetstream.KeyValue
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
}

// maxResolved bounds the resolved-properties cache: beyond it the cache is
// emptied and fills again with the queues in use (an entry is ~100 bytes).
const maxResolved = 1 << 16

// newPropCache loads the bucket (ctx bounds the wait) and follows it for the
// gateway's lifetime (Gateway.followBucket: Close stops it).
func newPropCache(ctx context.Context, g *Gateway, kv jetstream.KeyValue) (*propCache, error) {
	c := &propCache{kv: kv, log: g.log, own: make(map[string]mapping.Props), resolved: make(map[string]mapping.Effective)}
	f, err := g.followBucket(ctx, kv, "properties", c.apply, c.replayed)
	if err != nil {
		return nil, err
	}
	c.f = f
	return c, nil
}

// replayed forgets cached values the bucket no longer has.
func (c *propCache) replayed(present map[string]bool) {
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

func (c *propCache) apply(e jetstream.KeyValueEntry) {
	key := e.Key()
	deleted := e.Operation() != jetstream.KeyValuePut
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changedLocked()
	switch {
	case key == defaultsKey:
		if deleted {
			c.defaults = nil
			return
		}
		l, err := mapping.ParseDefaultList(e.Value())
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
		p, err := mapping.ParseProps(e.Value())
		if err != nil {
			c.log.Warn("ignoring invalid queue properties in KV", "key", key, "err", err)
			return
		}
		c.own[enc] = p
	}
}

// changedLocked forgets every resolved queue: own or defaults change
// (called under c.mu held for writing, before the change).
func (c *propCache) changedLocked() {
	c.gen++
	clear(c.resolved)
}

// effective is the queue's resolved properties. The result's Hooks map is
// shared with the cache and other callers: read it, never modify it.
func (c *propCache) effective(queue string) mapping.Effective {
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

func (c *propCache) defaultList() mapping.DefaultList {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.defaults
}

// setLocal applies this gateway's own write of the queue's properties
// before the follower sees it.
func (c *propCache) setLocal(enc string, p mapping.Props, present bool) {
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
func (c *propCache) setDefaultsLocal(list mapping.DefaultList) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changedLocked()
	c.defaults = list
}

// QueueProps returns the queue's effective properties without creating it.
func (g *Gateway) QueueProps(_ context.Context, queue string) (mapping.Effective, error) {
	if err := validName(queue); err != nil {
		return mapping.Effective{}, err
	}
	return g.props.effective(queue), nil
}

// UpdateProps merges patch into the queue's own properties, creating the queue.
func (g *Gateway) UpdateProps(ctx context.Context, queue string, patch mapping.Props) error {
	if err := validName(queue); err != nil {
		return err
	}
	// The properties are written before the queue is created, so that a new
	// queue's consumer starts with the AckWait of its own timeout (AckWait is
	// only ever raised later: lowering it under deliveries in flight would
	// have JetStream hand them out a second time).
	// Room for the queue is taken first: properties written for a queue
	// then refused would wait for whoever creates it next.
	release, err := g.queues.reserve(ctx, queue)
	if err != nil {
		return err
	}
	defer release()
	enc := mapping.EncodeName(queue)
	key := ownKeyPrefix + enc
	for attempt := 0; ; attempt++ {
		var cur mapping.Props
		var rev uint64
		e, err := g.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return jsErr("read properties", err)
		default:
			rev = e.Revision()
			if cur, err = mapping.ParseProps(e.Value()); err != nil {
				cur = mapping.Props{}
			}
		}
		next := cur.Merge(patch)
		var wrote uint64
		if rev == 0 {
			wrote, err = g.kv.Create(ctx, key, next.JSON())
		} else {
			wrote, err = g.kv.Update(ctx, key, next.JSON(), rev)
		}
		if err == nil {
			g.props.f.Wrote(key, wrote) // first: no older echo lands after the local write
			g.props.setLocal(enc, next, true)
			if _, err := g.queues.ensure(ctx, queue); err != nil {
				return err
			}
			return g.queues.applyProps(ctx, queue)
		}
		conflict := errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
		if !conflict || attempt >= 10 {
			return jsErr("write properties", err)
		}
	}
}

// ResetProps drops the queue's own properties (back to the defaults), creating
// the queue as LMQ's update_props without properties did.
func (g *Gateway) ResetProps(ctx context.Context, queue string) error {
	if err := validName(queue); err != nil {
		return err
	}
	if _, err := g.queues.ensure(ctx, queue); err != nil {
		return err
	}
	if err := g.dropOwnProps(ctx, queue); err != nil {
		return err
	}
	return g.queues.applyProps(ctx, queue)
}

func (g *Gateway) dropOwnProps(ctx context.Context, queue string) error {
	enc := mapping.EncodeName(queue)
	done := g.props.f.Removing(ownKeyPrefix + enc)
	err := g.kv.Purge(ctx, ownKeyPrefix+enc)
	done(ctx, err == nil)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return jsErr("delete properties", err)
	}
	g.props.setLocal(enc, mapping.Props{}, false)
	return nil
}

// DefaultProps returns the default-properties list.
func (g *Gateway) DefaultProps(context.Context) (mapping.DefaultList, error) {
	return g.props.defaultList(), nil
}

// SetDefaultProps replaces the default-properties list (nil or empty clears it).
func (g *Gateway) SetDefaultProps(ctx context.Context, list mapping.DefaultList) error {
	if len(list) == 0 {
		done := g.props.f.Removing(defaultsKey)
		err := g.kv.Purge(ctx, defaultsKey)
		done(ctx, err == nil)
		if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return jsErr("clear default properties", err)
		}
		g.props.setDefaultsLocal(nil)
		return nil
	}
	rev, err := g.kv.Put(ctx, defaultsKey, list.JSON())
	if err != nil {
		return jsErr("write default properties", err)
	}
	g.props.f.Wrote(defaultsKey, rev)
	g.props.setDefaultsLocal(list)
	return nil
}

func validName(queue string) error {
	if err := mapping.ValidateQueueName(queue); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}
