package gateway

import (
	"context"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/message"
)

// Dead letters (beyond LMQ) are kept, respawned and deleted by package
// release (gateway/release), in the queue's own stream on a subject the
// queue's consumer does not see: mapping.DeadSubject (lmq.d.<enc>).

// DeadLetter is a message whose retries were used up, kept because its queue
// has the dead_letter property.
type DeadLetter struct {
	Message    Message
	Deliveries int
	DiedAt     time.Time
	seq        uint64
}

// DeadLetterHead returns the oldest dead letter of queue, nil when none
// (view.Reader.DeadHead).
func (g *Inspect) DeadLetterHead(ctx context.Context, queue string) (*DeadLetter, error) {
	d, err := g.views.DeadHead(ctx, queue)
	if d == nil || err != nil {
		return nil, err
	}
	msg, _ := message.Decoded(d.Content, nil)
	return &DeadLetter{Message: msg, Deliveries: d.Deliveries, DiedAt: d.DiedAt, seq: d.Seq}, nil
}

// RespawnDeadLetters moves up to n of the oldest dead letters back into the
// queue with fresh retries; it returns how many moved.
func (g *Inspect) RespawnDeadLetters(ctx context.Context, queue string, n int) (int, error) {
	sh, err := g.queueShard(ctx, queue)
	if err != nil {
		return 0, err
	}
	q, err := g.disp.Ensure(ctx, queue)
	if err != nil {
		return 0, err
	}
	return g.rel.Respawn(ctx, sh, q, n)
}

// DeleteDeadLetters drops every dead letter of queue; it returns how many.
func (g *Inspect) DeleteDeadLetters(ctx context.Context, queue string) (uint64, error) {
	sh, err := g.queueShard(ctx, queue)
	if err != nil {
		return 0, err
	}
	return g.rel.DeleteDead(ctx, sh, queue)
}
