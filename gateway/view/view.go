// Package view owns the read-only views of stored queues: what JetStream
// holds for each queue (its counts by kind, bytes, deliveries in flight and
// where its shard stream is stored: QueueStatus), the next waiting messages
// and dead letters as the web console and GET /queues/{name}/messages show
// them (Peek), and the oldest dead letter (DeadHead). Looking never takes,
// delays or changes a message.
// It reads through package store's shard handles (store.Shard); what a queue is (its
// name's validity, whether it exists, its properties) it asks of the core
// (Core).
package view

import (
	"context"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// Core is what the views need of the gateway's core.
type Core struct {
	// Store holds the queues' shard streams.
	Store *store.Store
	// Shard is the handle on an existing queue's shard stream; an error
	// wrapping store.ErrInvalid for a bad name, store.ErrNotFound when the
	// queue does not exist.
	Shard func(ctx context.Context, queue string) (*store.Shard, error)
	// Names lists the queues that exist (the core's registry).
	Names func() []string
	// Props is a queue's effective properties.
	Props func(queue string) mapping.Effective
}

// Reader answers the views. It holds no state of its own beyond Core, so
// it is safe for concurrent use as far as Core's functions are.
type Reader struct {
	core Core
}

// New returns a Reader on core.
func New(core Core) *Reader { return &Reader{core: core} }
