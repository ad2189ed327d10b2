package dispatch

import (
	"context"
	"time"

	"github.com/lmq-gateway/lmq-gateway/store"
)

// A queue's consumer's AckWait kept a margin above the queue's timeout
// (package gateway's doc, "Deliveries"); the consumers themselves are
// package store's (store/consumers.go).

// ensureAckWait raises the consumer's AckWait when the queue's timeout grew, so
// that JetStream's backstop never fires before the gateway's own timer.
func (l *locals) ensureAckWait(ctx context.Context, q *Queue, timeout time.Duration) error {
	want := store.Backstop(timeout)
	q.mu.Lock()
	have, ready := q.ackWait, q.ready
	if !ready && want > have {
		q.ackWait = want // the consumer, when made, starts with it
	}
	q.mu.Unlock()
	if want <= have || !ready {
		return nil
	}
	limit := l.d.props.Effective(q.name).MaxInflight
	exists, err := l.d.store.Consumers().UpdateConsumer(ctx, q.name, store.Limits{AckWait: want, MaxInflight: limit})
	if err != nil {
		return err
	}
	if !exists {
		q.mu.Lock()
		q.ready = false
		q.ackWait = max(q.ackWait, want)
		q.mu.Unlock()
		return nil
	}
	q.mu.Lock()
	if want > q.ackWait {
		q.ackWait = want
	}
	q.limit = limit
	q.prio.ready = 0 // priority consumers are updated when next used
	q.mu.Unlock()
	return nil
}

// applyProps brings the consumer in line with changed properties.
func (l *locals) applyProps(ctx context.Context, queue string) error {
	q := l.local(queue)
	if q == nil {
		return nil
	}
	if err := l.ensureAckWait(ctx, q, l.d.props.Effective(queue).TimeoutDuration()); err != nil {
		return err
	}
	return q.applyControl(ctx)
}
