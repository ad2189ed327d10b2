package sqs

import (
	"context"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Core is everything the SQS front end uses of the core, in one place: one
// small interface per handle of the core (CoreOf makes it of a
// *gateway.Gateway; the tests the fake core's handles,
// internal/lmqtest/fakecore). Errors are the core's
// (gateway.ErrNotFound, ErrInvalid, …), which apiErrorOf maps onto SQS's
// error codes.
type Core struct {
	Queues   Queues
	Messages Messages
	Inspect  Inspect
}

// CoreOf is the Core of gateway g's handles.
func CoreOf(g *gateway.Gateway) Core {
	return Core{Queues: g.Queues(), Messages: g.Messages(), Inspect: g.Inspect()}
}

// Queues is what SQS manages queues with (gateway.Queues).
type Queues interface {
	CreateQueue(ctx context.Context, queue string) (created bool, err error)
	DeleteQueue(ctx context.Context, queue string) error
	// QueueNames lists every queue, sorted (ListQueues).
	QueueNames() []string
	// QueueExists reports whether a queue exists, without listing them all.
	QueueExists(ctx context.Context, queue string) (bool, error)
	QueueProps(ctx context.Context, queue string) (mapping.Effective, error)
	UpdateProps(ctx context.Context, queue string, patch mapping.Props) error
	Purge(ctx context.Context, queue string) error
	// QueueMeta is what SQS keeps about a queue beyond LMQ's properties
	// (zero for a queue that has none); UpdateQueueMeta changes it under fn.
	QueueMeta(ctx context.Context, queue string) (QueueMeta, error)
	UpdateQueueMeta(ctx context.Context, queue string, fn func(*QueueMeta)) error
}

// Messages is what SQS sends, receives and deletes with
// (gateway.Messages).
type Messages interface {
	PushSeq(ctx context.Context, queue string, msg gateway.Message, opts gateway.PushOptions) (uint64, error)
	Pull(ctx context.Context, queue string, wait time.Duration) (*gateway.Delivery, error)
	Reply(ctx context.Context, queue, id string, kind gateway.ReplyKind) error
	SetVisibility(ctx context.Context, queue, id string, d time.Duration) error
}

// Inspect is what SQS reads of a queue's contents (gateway.Inspect).
type Inspect interface {
	QueueDetail(ctx context.Context, queue string) (gateway.QueueDetail, error)
}

var (
	_ Queues   = (*gateway.Queues)(nil)
	_ Messages = (*gateway.Messages)(nil)
	_ Inspect  = (*gateway.Inspect)(nil)
)

// QueueMeta is a queue's metadata (gateway.QueueMeta): when it was created
// and last changed, its tags, and in Attrs the SQS attributes LMQ has no
// property for (DelaySeconds, ReceiveMessageWaitTimeSeconds, RedrivePolicy,
// FifoQueue, …), as SQS spells them.
type QueueMeta = gateway.QueueMeta
