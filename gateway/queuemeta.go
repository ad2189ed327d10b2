package gateway

import (
	"context"
	"fmt"

	"github.com/lmq-gateway/lmq-gateway/gateway/meta"
)

// Queue metadata (package meta): one record per queue in the KV bucket
// LMQ_META, read on request; the handles check that the queue exists.

// QueueMeta is what the core keeps about a queue beside its properties, for
// front ends whose protocol says more (SQS): meta.Meta.
type QueueMeta = meta.Meta

// Bounds of a metadata record (meta.MaxTags…).
const (
	MaxQueueTags    = meta.MaxTags
	MaxQueueAttrs   = meta.MaxAttrs
	MaxQueueMetaLen = meta.MaxLen
)

// QueueMeta returns the queue's metadata (all zero when it has none);
// ErrNotFound when the queue does not exist.
func (g *Queues) QueueMeta(ctx context.Context, queue string) (QueueMeta, error) {
	if err := g.existing(ctx, queue); err != nil {
		return QueueMeta{}, err
	}
	return g.meta.Get(ctx, queue)
}

// UpdateQueueMeta changes the queue's metadata under fn (meta.Records.Update
// says how); ErrNotFound when the queue does not exist.
func (g *Queues) UpdateQueueMeta(ctx context.Context, queue string, fn func(*QueueMeta)) error {
	if err := g.existing(ctx, queue); err != nil {
		return err
	}
	return g.meta.Update(ctx, queue, fn)
}

// existing checks the name and that the queue exists (ErrNotFound).
func (g *core) existing(ctx context.Context, queue string) error {
	ok, err := (&Queues{g}).QueueExists(ctx, queue)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("queue %q: %w", queue, ErrNotFound)
	}
	return nil
}

// QueueExists reports whether queue exists: from the registry's mirror, or
// when the mirror does not know it (yet) from the registry itself; no copy
// of the queue list, so a front end may ask it for every request.
func (g *Queues) QueueExists(ctx context.Context, queue string) (bool, error) {
	if err := validName(queue); err != nil {
		return false, err
	}
	return g.reg.Exists(ctx, queue)
}
