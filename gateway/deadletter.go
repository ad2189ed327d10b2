package gateway

import (
	"context"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/dead"
	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
)

// Messages whose retries are used up are package dead's (gateway/dead):
// dead letters (kept in the queue's own stream on mapping.DeadSubject)
// and redrive (SQS's RedrivePolicy: moved into the queue the property
// dead_letter_queue names). These are the core's calls into it.

func newDead(g *core) *dead.Keeper {
	return dead.New(dead.Config{
		Store:     g.store,
		Disp:      g.disp,
		Props:     g.props,
		Shard:     g.queueShard,
		Body:      g.body,
		AckRemove: g.ackRemove,
		GroupEnd:  g.groupEnd,
		GroupNext: g.groupNext,
		OpContext: g.opContext,
		Timeout:   opTimeout,
		Logger:    g.log,
	})
}

// bury moves a retry-exhausted message to the queue's dead letters
// (dead.Keeper.Bury).
func (g *core) bury(r *dispatch.Raw) error { return g.dead.Bury(r) }

// redriveTarget is the queue retry-exhausted messages of queue move to, ""
// when none (dead.Keeper.RedriveTarget).
func (g *core) redriveTarget(queue string) string { return g.dead.RedriveTarget(queue) }

// redrive moves r, whose retries are used up, into the queue target
// (dead.Keeper.Redrive).
func (g *core) redrive(r *dispatch.Raw, target string) error { return g.dead.Redrive(r, target) }

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
	msg, _ := decoded(d.Content, nil)
	return &DeadLetter{Message: msg, Deliveries: d.Deliveries, DiedAt: d.DiedAt, seq: d.Seq}, nil
}

// RespawnDeadLetters moves up to n of the oldest dead letters back into the
// queue with fresh retries; it returns how many moved (dead.Keeper.Respawn).
func (g *Inspect) RespawnDeadLetters(ctx context.Context, queue string, n int) (int, error) {
	return g.dead.Respawn(ctx, queue, n)
}

// DeleteDeadLetters drops every dead letter of queue; it returns how many
// (dead.Keeper.Delete).
func (g *Inspect) DeleteDeadLetters(ctx context.Context, queue string) (uint64, error) {
	return g.dead.Delete(ctx, queue)
}
