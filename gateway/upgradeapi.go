package gateway

import (
	"context"
)

// What the layout upgrade (package upgrade) needs of the core, and no more:
// it moves queues of the one-stream-per-queue layout into the shards before
// anything is served, so it must register each queue and write into the
// queue's shard stream itself. Everything else it does (the old streams,
// the upgrade lock, the accumulator's close jobs) is outside the core.

// RegisterQueue makes queue exist (its registry key and its shard stream)
// without storing a message.
func (g *Logs) RegisterQueue(ctx context.Context, queue string) error {
	return g.reg.Register(ctx, queue)
}

// MakeShard makes sure queue's shard stream exists (up to date), creating
// it if need be. Only the layout upgrade writes to it outside the core: it
// opens the stream itself (package upgrade keeps its own JetStream use).
func (g *Logs) MakeShard(ctx context.Context, queue string) error {
	_, err := g.store.Shards().QueueShard(ctx, queue)
	return err
}
