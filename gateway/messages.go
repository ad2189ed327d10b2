package gateway

import (
	"context"
	"strings"

	"github.com/lmq-gateway/lmq-gateway/gateway/redrive"
	"github.com/lmq-gateway/lmq-gateway/gateway/waiting"
)

// One queue's waiting messages (beyond LMQ), by id: listed without taking
// them, removed one at a time or moved to another queue. Package waiting
// does it (its doc says what waiting means, and the race a removal
// leaves); the core gives it the queue's existence, the peek, a group's
// moving on and the redrive's store (newWaiting).

// newWaiting is the waiting messages' editor on this core.
func newWaiting(g *core) *waiting.Editor {
	return waiting.New(waiting.Config{
		Store:         g.store,
		Shard:         g.queueShard,
		Peek:          g.views.Peek,
		GroupHeadGone: g.groups.HeadGone,
		StoreMoved: func(ctx context.Context, source, target string, m waiting.Moved) (uint64, error) {
			return g.mover.Store(ctx, source, target, redrive.Moved{
				Header: m.Header, Body: m.Body, PushedAt: m.PushedAt, Priority: m.Priority,
				ID: moveID(source, target, m.Seq),
			})
		},
		Logger: g.log,
	})
}

// Messages returns up to n (1..MaxPeek) of the queue's waiting messages in
// the order they will be delivered, without taking them (view.Reader.Peek);
// without withBody their bodies and parts are left out. ErrInvalid for n
// out of range, ErrNotFound when the queue does not exist.
func (g *Inspect) Messages(ctx context.Context, queue string, n int, withBody bool) ([]Peeked, error) {
	return g.edits.List(ctx, queue, n, withBody)
}

// DeleteMessage removes the queue's waiting message whose id (stream
// sequence) is seq, with its Object Store body if it has one
// (waiting.Editor.Delete). ErrInvalid for seq 0; ErrNotFound when the queue
// does not exist, or seq is not one of its waiting messages.
func (g *Inspect) DeleteMessage(ctx context.Context, queue string, seq uint64) error {
	return g.edits.Delete(ctx, queue, seq)
}

// MoveMessage moves the queue's waiting message whose id (stream sequence)
// is seq into the queue target (created when it does not exist) as a new
// message there, as redrive moves a retry-exhausted one
// (waiting.Editor.Move). ErrInvalid for seq 0, an invalid target or target
// == queue; ErrNotFound as for DeleteMessage.
func (g *Inspect) MoveMessage(ctx context.Context, queue string, seq uint64, target string) error {
	return g.edits.Move(ctx, queue, seq, target)
}

// moveID is the Nats-Msg-Id of the copy MoveMessage stores of source's
// message seq in target (not of idempotencyID's form, as redrive.ID).
func moveID(source, target string, seq uint64) string {
	return "move" + strings.TrimPrefix(redrive.ID(source, target, seq), "redrive")
}
