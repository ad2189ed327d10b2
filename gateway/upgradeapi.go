package gateway

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// What the layout upgrade (package upgrade) needs of the core, and no more:
// it moves queues of the one-stream-per-queue layout into the shards before
// anything is served, so it must register each queue and write into the
// queue's shard stream itself. Everything else it does (the old streams,
// the upgrade lock, the accumulator's close jobs) is outside the core.

// RegisterQueue makes queue exist (its registry key and its shard stream)
// without storing a message.
func (g *Gateway) RegisterQueue(ctx context.Context, queue string) error {
	return g.reg.Register(ctx, queue)
}

// ShardStream is the stream of queue's shard, created if it does not exist
// yet. Only the layout upgrade writes to it outside the core.
func (g *Gateway) ShardStream(ctx context.Context, queue string) (jetstream.Stream, error) {
	return g.store.QueueShard(ctx, queue)
}
