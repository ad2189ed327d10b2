package props

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// Writes to the bucket. Each is applied to this gateway's mirror as soon as
// JetStream took it (a client reads its own write), and noted with the
// follower first, so that no older echo lands after the local write.

// maxConflicts bounds Update's retries when other gateways write the same
// queue's properties at the same moment.
const maxConflicts = 10

// leaderWait bounds how long a write waits for the bucket's stream to have a
// leader again, as a push waits for its queue's (store.Publish).
const leaderWait = 5 * time.Second

// leaderless reports an answer that says the bucket's stream has no leader
// for the moment: an election in a cluster, or this gateway's NATS node just
// went away. A write that got it did not happen and may be sent again.
func leaderless(err error) bool { return errors.Is(err, kv.ErrNoLeader) }

// retryLeaderless runs write until it is done, fails otherwise than
// leaderless, or leaderWait has passed; it keeps the last error.
func retryLeaderless(ctx context.Context, write func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, leaderWait)
	defer cancel()
	wait := 20 * time.Millisecond
	for {
		err := write(ctx)
		if err == nil || !leaderless(err) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (no leader within %v)", err, leaderWait)
		case <-t.C:
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// Update merges patch into the queue's own properties: read, merge, and a
// write conditional on the revision read, again on a conflict. The caller
// has validated the name and reserved room for the queue.
func (c *Cache) Update(ctx context.Context, queue string, patch mapping.Props) error {
	enc := mapping.EncodeName(queue)
	key := ownKeyPrefix + enc
	err := retryLeaderless(ctx, func(ctx context.Context) error { return c.update(ctx, enc, key, patch) })
	if leaderless(err) {
		return store.Classify("write properties", err)
	}
	return err
}

// update is one Update: read, merge, conditional write, again on conflicts.
func (c *Cache) update(ctx context.Context, enc, key string, patch mapping.Props) error {
	for attempt := 0; ; attempt++ {
		var cur mapping.Props
		var rev uint64
		e, err := c.kv.Get(ctx, key)
		switch {
		case errors.Is(err, kv.ErrKeyNotFound):
		case leaderless(err):
			return err
		case err != nil:
			return store.Classify("read properties", err)
		default:
			rev = e.Revision
			if cur, err = mapping.ParseProps(e.Value); err != nil {
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
		if leaderless(err) {
			return err
		}
		conflict := errors.Is(err, kv.ErrKeyExists) || errors.Is(err, kv.ErrRevisionMismatch)
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
	err := retryLeaderless(ctx, func(ctx context.Context) error { return c.kv.Purge(ctx, ownKeyPrefix+enc) })
	done(ctx, err == nil)
	if err != nil && !errors.Is(err, kv.ErrKeyNotFound) {
		return store.Classify("delete properties", err)
	}
	c.setLocal(enc, mapping.Props{}, false)
	return nil
}

// SetDefaults replaces the default-properties list (nil or empty clears it).
func (c *Cache) SetDefaults(ctx context.Context, list mapping.DefaultList) error {
	if len(list) == 0 {
		done := c.f.Removing(defaultsKey)
		err := retryLeaderless(ctx, func(ctx context.Context) error { return c.kv.Purge(ctx, defaultsKey) })
		done(ctx, err == nil)
		if err != nil && !errors.Is(err, kv.ErrKeyNotFound) {
			return store.Classify("clear default properties", err)
		}
		c.setDefaultsLocal(nil)
		return nil
	}
	var rev uint64
	err := retryLeaderless(ctx, func(ctx context.Context) (err error) {
		rev, err = c.kv.Put(ctx, defaultsKey, list.JSON())
		return err
	})
	if err != nil {
		return store.Classify("write default properties", err)
	}
	c.f.Wrote(defaultsKey, rev)
	c.setDefaultsLocal(list)
	return nil
}
