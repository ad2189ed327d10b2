package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/inflight"
)

// visibilityKind is SetVisibility's reply kind between gateways (inflight.Relay);
// clients never send it.
const visibilityKind ReplyKind = 100

// MaxVisibility bounds SetVisibility's time left: SQS's 12 hours.
const MaxVisibility = 12 * time.Hour

// SetVisibility sets the time left of delivery id of queue to d, counted
// from now, whichever gateway holds it (SQS's ChangeMessageVisibility):
// d > 0 moves its deadline (the consumer's backstop AckWait is raised when d
// is longer than the queue's timeout); d == 0 gives the message back at
// once, like a nack that does not count as a retry. ErrNotFound for an
// unknown, answered or expired delivery; ErrInvalid for d out of 0 to
// MaxVisibility.
func (g *Messages) SetVisibility(ctx context.Context, queue, id string, d time.Duration) error {
	if err := validName(queue); err != nil {
		return err
	}
	if d < 0 || d > MaxVisibility {
		return fmt.Errorf("%w: visibility timeout must be from 0 to %v", ErrInvalid, MaxVisibility)
	}
	del := g.dels.Get(id)
	if del == nil {
		if g.acked.Has(id) {
			return fmt.Errorf("delivery %s: %w", id, ErrAlreadyAcked)
		}
		return g.relayReply(ctx, queue, id, visibilityKind, d)
	}
	if del.Queue() != queue {
		return fmt.Errorf("delivery %s in queue %q: %w", id, queue, ErrNotFound)
	}
	return g.visibilityLocal(ctx, del, d)
}

// visibilityLocal is SetVisibility of a delivery this gateway holds.
func (g *core) visibilityLocal(ctx context.Context, d *inflight.Entry, left time.Duration) error {
	if left == 0 {
		if d.Expired(time.Now()) || !g.take(d) {
			return inflight.NotFound(d.ID)
		}
		g.rel.Release(d.Raw, false)
		return nil
	}
	ectx, cancel := context.WithTimeout(ctx, replyTimeout)
	defer cancel()
	if err := g.disp.EnsureAckWait(ectx, d.Raw.Queue(), left); err != nil {
		return err
	}
	if !d.Extend(time.Now(), left) {
		return inflight.NotFound(d.ID)
	}
	// JetStream's backstop clock restarts too (AckWait ≥ Backstop(left)).
	if err := g.store.Progress(&d.Raw.Msg); err != nil {
		return jsErr("change visibility", err)
	}
	return nil
}
