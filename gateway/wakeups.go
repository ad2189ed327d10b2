package gateway

import "github.com/lmq-gateway/lmq-gateway/internal/wakeups"

// wakeTarget is what a wake-up (package wakeups) pokes: a queue's waiting
// clients on every gateway (Gateway.Notify; merged per slot, for delayed
// pushes falling due) or, with q set, that dispatcher only (queueState.notify,
// a retry of a refused pull request).
type wakeTarget struct {
	queue string
	q     *queueState
}

func newWakeups(g *Gateway) *wakeups.Timer[wakeTarget] {
	return wakeups.New(func(t wakeTarget) {
		if t.q != nil {
			t.q.notify()
		} else {
			g.Notify(t.queue)
		}
	}, g.log, g.noise)
}
