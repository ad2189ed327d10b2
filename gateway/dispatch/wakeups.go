package dispatch

import (
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/wakeups"
)

// wakeTarget is what a wake-up (package wakeups) pokes: a queue's waiting
// clients on every gateway (Dispatcher.Notify; merged per slot, for delayed
// pushes falling due) or, with q set, that dispatcher only (Queue.notify,
// a retry of a refused pull request).
type wakeTarget struct {
	queue string
	q     *Queue
}

func newWakeups(d *Dispatcher) *wakeups.Timer[wakeTarget] {
	return wakeups.New(func(t wakeTarget) {
		if t.q != nil {
			t.q.notify()
		} else {
			d.Notify(t.queue)
		}
	}, d.log, d.noise)
}

// NotifyAt wakes the clients waiting on queue, on every gateway, at about
// at (Notify; wake-ups of one slot are merged): for a delayed push falling
// due.
func (d *Dispatcher) NotifyAt(queue string, at time.Time) {
	d.wakes.AtSlot(wakeTarget{queue: queue}, at)
}
