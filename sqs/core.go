package sqs

import (
	"context"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Core is everything the SQS front end uses of the core, in one place;
// *gateway.Gateway implements it once the queue metadata (QueueMeta,
// UpdateQueueMeta) is there, and the tests use an adapter. Errors are the
// core's (gateway.ErrNotFound, ErrInvalid, …), which apiErrorOf maps onto
// SQS's error codes.
type Core interface {
	CreateQueue(ctx context.Context, queue string) (created bool, err error)
	DeleteQueue(ctx context.Context, queue string) error
	// QueueNames lists every queue, sorted (ListQueues).
	QueueNames() []string
	// QueueExists reports whether a queue exists, without listing them all.
	QueueExists(ctx context.Context, queue string) (bool, error)
	QueueDetail(ctx context.Context, queue string) (gateway.QueueDetail, error)
	QueueProps(ctx context.Context, queue string) (mapping.Effective, error)
	UpdateProps(ctx context.Context, queue string, patch mapping.Props) error
	Purge(ctx context.Context, queue string) error

	PushSeq(ctx context.Context, queue string, msg gateway.Message, opts gateway.PushOptions) (uint64, error)
	Pull(ctx context.Context, queue string, wait time.Duration) (*gateway.Delivery, error)
	Reply(ctx context.Context, queue, id string, kind gateway.ReplyKind) error
	SetVisibility(ctx context.Context, queue, id string, d time.Duration) error

	// QueueMeta is what SQS keeps about a queue beyond LMQ's properties
	// (zero for a queue that has none); UpdateQueueMeta changes it under fn.
	QueueMeta(ctx context.Context, queue string) (QueueMeta, error)
	UpdateQueueMeta(ctx context.Context, queue string, fn func(*QueueMeta)) error
}

// QueueMeta is a queue's metadata (gateway.QueueMeta): when it was created
// and last changed, its tags, and in Attrs the SQS attributes LMQ has no
// property for (DelaySeconds, ReceiveMessageWaitTimeSeconds, RedrivePolicy,
// FifoQueue, …), as SQS spells them.
type QueueMeta = gateway.QueueMeta
