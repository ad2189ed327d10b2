package props

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// Writes to the bucket. Each is applied to this gateway's mirror as soon as
// JetStream took it (a client reads its own write), and noted with the
// follower first, so that no older echo lands after the local write.

// maxConflicts bounds Update's retries when other gateways write the same
// queue's properties at the same moment.
const maxConflicts = 10

// Update merges patch into the queue's own properties: read, merge, and a
// write conditional on the revision read, again on a conflict. The caller
// has validated the name and reserved room for the queue.
func (c *Cache) Update(ctx context.Context, queue string, patch mapping.Props) error {
	enc := mapping.EncodeName(queue)
	key := ownKeyPrefix + enc
	for attempt := 0; ; attempt++ {
		var cur mapping.Props
		var rev uint64
		e, err := c.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return store.Classify("read properties", err)
		default:
			rev = e.Revision()
			if cur, err = mapping.ParseProps(e.Value()); err != nil {
				cur = mapping.Props{}
			}
		}
		next := cur.Merge(patch)
		var wrote uint64
		if rev == 0 {
			wrote, err = c.kv.Create(ctx, key, next.JSON())
		} else {
			wrote, err = c.kv.Update(ctx, key, next.JSON(), rev)
		}
		if err == nil {
			c.f.Wrote(key, wrote) // first: no older echo lands after the local write
			c.setLocal(enc, next, true)
			return nil
		}
		conflict := errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
		if !conflict || attempt >= maxConflicts {
			return store.Classify("write properties", err)
		}
	}
}

// Drop removes the queue's own properties (back to the defaults); none to
// remove is no error.
func (c *Cache) Drop(ctx context.Context, queue string) error {
	enc := mapping.EncodeName(queue)
	done := c.f.Removing(ownKeyPrefix + enc)
	err := c.kv.Purge(ctx, ownKeyPrefix+enc)
	done(ctx, err == nil)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return store.Classify("delete properties", err)
	}
	c.setLocal(enc, mapping.Props{}, false)
	return nil
}

// SetDefaults replaces the default-properties list (nil or empty clears it).
func (c *Cache) SetDefaults(ctx context.Context, list mapping.DefaultList) error {
	if len(list) == 0 {
		done := c.f.Removing(defaultsKey)
		err := c.kv.Purge(ctx, defaultsKey)
		done(ctx, err == nil)
		if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return store.Classify("clear default properties", err)
		}
		c.setDefaultsLocal(nil)
		return nil
	}
	rev, err := c.kv.Put(ctx, defaultsKey, list.JSON())
	if err != nil {
		return store.Classify("write default properties", err)
	}
	c.f.Wrote(defaultsKey, rev)
	c.setDefaultsLocal(list)
	return nil
}
