package dispatch

import (
	"context"
	"time"

	"github.com/lmq-gateway/lmq-gateway/store"
)

// Queue control (issue 27): the queue properties paused and max_inflight,
// which every gateway follows in LMQ_PROPS (package props).
//
// Paused: kickLocked sends no pull request for a paused queue and answers
// its no-wait waiters empty at once; waiting clients keep waiting. A message
// that arrives for a request sent just before the pause is put back
// (handoff), without costing a retry. Deliveries in flight are the core's
// and are answered as usual. Any change of the properties (this gateway's
// write or another's, followed from the bucket) runs controlLoop, which
// kicks the queues with waiting clients and wakes every waiting pull-any:
// resuming hands messages out at once, on every gateway.
//
// max_inflight: the queue's consumers carry it as MaxAckPending, so
// JetStream itself counts the deliveries in flight across every gateway
// (a delivery in flight is a pending ack; a release acks the original
// after storing its copy). A pull request to a full consumer is held by
// JetStream until an ack frees a slot, then answered with the next message:
// an ack, nack or timeout on any gateway lets the next one go. Such a
// request is sent with an expiry (limitHold), never as a bare no-wait one,
// which JetStream would keep forever; when it expires empty the waiting
// clients send the next. A message handed to a held request whose client
// left meanwhile is put back at the tail, as for any raced pull. With
// priorities each level's consumer carries the limit, so the bound holds
// per level (documented in docs/api.md).

// limitHold is how long JetStream may hold a pull request of a queue with a
// max_inflight limit waiting for a free slot.
const limitHold = time.Second

// pausedLocked answers the paused queue's no-wait waiters empty.
func (q *Queue) pausedLocked() {
	for _, e := range q.waiters {
		if e.w.noWait && e.w.claimed.CompareAndSwap(false, true) {
			e.w.ch <- nil
		}
	}
}

// PropsChanged tells the dispatcher that some queue's properties (or the
// default list) changed; controlLoop applies it. It never blocks.
func (d *Dispatcher) PropsChanged() {
	select {
	case d.changed <- struct{}{}:
	default: // one is pending already
	}
}

// controlLoop applies property changes to this gateway's queues until
// Closing or Stop.
func (d *Dispatcher) controlLoop() {
	defer d.bg.Done()
	for {
		select {
		case <-d.closing:
			return
		case <-d.stopped:
			return
		case <-d.changed:
		}
		// Under the dispatcher's context (a child of the work owner's), so
		// that Stop cuts a change being applied short instead of waiting.
		d.within(func(context.Context) {
			for _, q := range d.queues.all() {
				ctx, cancel := context.WithTimeout(d.run, opTimeout)
				if err := q.applyControl(ctx); err != nil {
					if n, ok := d.noise.Allow("applying max_inflight failed"); ok {
						d.log.Warn("applying max_inflight to the queue's consumer failed", "queue", q.name, "err", err, "suppressed", n)
					}
				}
				cancel()
			}
			d.queues.wakeAllAny()
		})
	}
}

// applyControl brings the queue in line with its paused and max_inflight
// properties: the consumer gets the limit, and waiting clients of a queue
// that is not paused get a pull request.
func (q *Queue) applyControl(ctx context.Context) error {
	eff := q.d.props.Effective(q.name)
	q.mu.Lock()
	update := q.ready && eff.MaxInflight != q.limit
	ackWait := q.ackWait
	if !eff.Paused {
		q.kickLocked()
	}
	q.mu.Unlock()
	if !update {
		return nil
	}
	exists, err := q.d.store.Consumers().UpdateConsumer(ctx, q.name, store.Limits{AckWait: ackWait, MaxInflight: eff.MaxInflight})
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !exists {
		q.ready = false // made again, with the limit, by the next pull
		return nil
	}
	q.limit = eff.MaxInflight
	q.prio.ready = 0 // priority consumers are updated when next used
	q.kickLocked()
	return nil
}
