package gateway

import (
	"context"
	"fmt"

	"github.com/lmq-gateway/lmq-gateway/gateway/leftover"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// DeleteQueue drops the queue, all its messages and its metadata; ErrNotFound
// if it does not exist.
//
// The registry key goes first (registry.Delete), so that every gateway
// stops serving the queue; then its messages, its consumer, its properties
// and large bodies. A push through a gateway that has not yet heard of the
// deletion may still land after the purge: such a message is not lost, the
// next start of any gateway registers its queue again (registry's adopt).
//
// A store at its limit (or a full disk) refuses the registry's tombstone,
// a write like any other, while the stream purge needs no room: then the
// queue's messages go first, freeing the space, and the key after them.
// The property and metadata tombstones that follow may still find the
// store full (the queue freed less than other queues keep filling):
// the queue is deleted then, and they are finished in the background
// (package leftover) rather than failing a deletion that has happened.
func (g *Queues) DeleteQueue(ctx context.Context, queue string) error {
	if err := validName(queue); err != nil {
		return err
	}
	if err := g.reg.Delete(ctx, queue); err != nil {
		if !store.IsStorageFull(err) {
			return err
		}
		g.log.Warn("the store is full: deleting the queue's messages before recording its deletion", "queue", queue, "err", err)
		if derr := g.store.Consumers().DropMessages(ctx, queue); derr != nil {
			return fmt.Errorf("%w (freeing its messages first: %w)", err, derr)
		}
		if err := g.reg.Delete(ctx, queue); err != nil {
			// Still full (the queue held less than the store is over its
			// limit): the queue stays, empty; a retry completes it once
			// space is freed.
			return fmt.Errorf("%w (the queue's messages were removed; its deletion needs room in the store: retry once other queues are purged or drained)", err)
		}
	}
	g.dels.DropQueue(queue)
	if err := g.store.Consumers().DeleteQueue(ctx, queue); err != nil {
		return err
	}
	if err := g.dropOwnProps(ctx, queue); err != nil {
		if !store.IsStorageFull(err) {
			return err
		}
		g.left.Add(queue, leftover.Props)
	}
	if err := g.meta.Drop(ctx, queue); err != nil {
		if !store.IsStorageFull(err) {
			return err
		}
		g.left.Add(queue, leftover.Meta)
	}
	g.store.Bodies().DeleteQueueBodies(ctx, queue)
	return nil
}

// QueueNames lists every existing queue, sorted.
func (g *Queues) QueueNames() []string { return g.reg.Names() }

// CreateQueue makes queue exist (as a push or pull would) without storing
// anything; created is false when it existed already. SQS's CreateQueue.
// A queue it makes has its creation time in its metadata (QueueMeta).
func (g *Queues) CreateQueue(ctx context.Context, queue string) (created bool, err error) {
	if err := validName(queue); err != nil {
		return false, err
	}
	exists, err := g.reg.Exists(ctx, queue)
	if err != nil {
		return false, err
	}
	if exists {
		return false, nil
	}
	if _, err := g.disp.Ensure(ctx, queue); err != nil {
		return false, err
	}
	if err := g.meta.Created(ctx, queue); err != nil {
		// The queue is made: a retried CreateQueue would find it and not
		// record the time either. UpdateQueueMeta records one later.
		g.log.Warn("could not record the creation time of a new queue", "queue", queue, "err", err)
	}
	return true, nil
}
