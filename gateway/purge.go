package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/lmq-gateway/lmq-gateway/store"
)

// Purge removes every waiting message of queue (beyond LMQ: HTTP DELETE
// /queues/{name}/messages, RPC purge): deliverable ones of every priority,
// delayed ones, parts of open accumulation windows, ordered groups'
// messages. The queue, its properties and its dead letters stay.
// ErrNotFound if the queue does not exist.
//
// Deliveries in flight anywhere are purged with the rest (their messages
// are in the stream until acked) and are not delivered again: an ack of
// one succeeds, a nack or timeout finds its message gone (release) and
// puts nothing back. Every piece of a queue's waiting state is in
// JetStream, so nothing in any gateway's memory must be told: a
// dispatcher that thinks a level holds messages finds it empty on its next
// pull. An open accumulation window stays open; its compound holds only
// the parts pushed after the purge, and none is stored when there are none
// (package accumulator). Pushes that race with the purge are kept or
// purged as they fall.
//
// Large bodies of the purged messages are removed too, except those stored
// within store.BodyGrace before the purge (a push may not have stored
// their message yet): a second sweep removes those once the grace has
// passed, if this gateway still runs then.
func (g *Queues) Purge(ctx context.Context, queue string) error {
	if err := g.existing(ctx, queue); err != nil {
		return err
	}
	start := time.Now()
	if err := g.store.Consumers().PurgeWaiting(ctx, queue); err != nil {
		return fmt.Errorf("purge %q: %w", queue, err)
	}
	g.log.Info("queue purged", "queue", queue)
	// The sweeps run on their own deadline: the purge is done, and a
	// client that leaves now should not leave the bodies behind.
	g.spawn(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, sweepTimeout)
		defer cancel()
		g.store.Bodies().PurgeBodies(ctx, queue, start.Add(-store.BodyGrace))
	})
	time.AfterFunc(store.BodyGrace, func() {
		g.within(func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(ctx, sweepTimeout)
			defer cancel()
			g.store.Bodies().PurgeBodies(ctx, queue, start)
		})
	})
	return nil
}

// sweepTimeout bounds one sweep of a purged queue's large bodies: a list of
// the bucket and a read of the queue's remaining messages.
const sweepTimeout = time.Minute
