package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/view"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// What JetStream knows about queues, and their messages as the console
// shows them, is package view's (gateway/view): the core gives it the
// queues that exist and their properties (newViews). The types are
// aliases, so front ends name them as the core's.

// QueueInfo is what JetStream knows about a queue (view.QueueInfo).
type QueueInfo = view.QueueInfo

// QueueDetail is the introspection view of one queue.
type QueueDetail = QueueInfo

// QueueStatus is QueueInfo plus where the queue's stream is stored
// (view.QueueStatus).
type QueueStatus = view.QueueStatus

// Peeked is one waiting message as Peek sees it (view.Peeked).
type Peeked = view.Peeked

// Bounds of Peek (view.MaxPeek...).
const (
	MaxPeek      = view.MaxPeek
	MaxPeekBody  = view.MaxPeekBody
	MaxPeekParts = view.MaxPeekParts
)

// ReplicaSilence is how long a Raft leader may go without hearing from a
// replica before that replica counts as gone (view.ReplicaSilence).
const ReplicaSilence = view.ReplicaSilence

// newViews is the read-only views on this core (after props is open).
func newViews(g *core) *view.Reader {
	return view.New(view.Core{
		Store: g.store,
		Shard: g.queueShard,
		Names: func() []string { return g.reg.Names() },
		Props: g.props.Effective,
	})
}

// Queue returns JetStream's view of one queue; ErrNotFound if it does not exist.
func (g *Inspect) Queue(ctx context.Context, queue string) (QueueInfo, error) {
	s, err := g.QueueStatus(ctx, queue)
	return s.QueueInfo, err
}

// QueueDetail reports a queue's sizes by kind; ErrNotFound if it does not exist.
func (g *Inspect) QueueDetail(ctx context.Context, queue string) (QueueDetail, error) {
	return g.Queue(ctx, queue)
}

// QueueStatus returns JetStream's view of one queue with its placement;
// ErrNotFound if it does not exist.
func (g *Inspect) QueueStatus(ctx context.Context, queue string) (QueueStatus, error) {
	return g.views.Status(ctx, queue)
}

// QueueStatuses returns the view of every existing queue of scope (nil:
// all), sorted by name, from one look at each shard stream and its
// consumers. A queue whose shard did not answer has Err set.
func (g *Inspect) QueueStatuses(ctx context.Context, scope Scope) ([]QueueStatus, error) {
	return g.views.Statuses(ctx, scope.Allows)
}

// Peek returns up to n (at most MaxPeek) of the queue's next waiting
// messages, in the order pulls would get them, without taking them
// (view.Reader.Peek). ErrNotFound when the queue does not exist.
func (g *Inspect) Peek(ctx context.Context, queue string, n int) ([]Peeked, error) {
	return g.views.Peek(ctx, queue, n)
}

// PeekDead returns up to n (at most MaxPeek) of the queue's oldest dead
// letters, without removing them. ErrNotFound when the queue does not exist.
func (g *Inspect) PeekDead(ctx context.Context, queue string, n int) ([]Peeked, error) {
	return g.views.PeekDead(ctx, queue, n)
}

// OldestWaiting returns when the oldest of the queue's next waiting
// messages was pushed; zero when none is waiting or its push time is
// unknown; ErrNotFound when the queue does not exist.
func (g *Inspect) OldestWaiting(ctx context.Context, queue string) (time.Time, error) {
	return g.views.OldestWaiting(ctx, queue)
}

// queueShard returns the handle on an existing queue's shard stream;
// ErrNotFound when the queue does not exist.
func (g *core) queueShard(ctx context.Context, queue string) (*store.Shard, error) {
	if err := validName(queue); err != nil {
		return nil, err
	}
	ok, err := g.reg.Exists(ctx, queue)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("queue %q: %w", queue, ErrNotFound)
	}
	sh, err := g.store.Shards().QueueShard(ctx, queue)
	if store.StreamGone(err) {
		return nil, fmt.Errorf("queue %q: %w", queue, ErrNotFound)
	}
	return sh, err
}
