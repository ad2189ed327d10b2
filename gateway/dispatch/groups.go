package dispatch

import (
	"context"
	"time"
)

// Ordered groups (mapping/groups.go, gateway/groups.go): to the dispatcher a
// group's head copy is one more deliverable message of the queue (its
// consumer reads the head subjects beside the queue's), handed out in the
// queue's order. What it adds is the sweep for groups left without a head:
// the core copies a group's next message to its head subject when the
// previous one is done, and a gateway that stops between the two leaves the
// group's backlog stored and never handed out. The sweep runs when a
// gateway makes a queue's consumer (after a restart, the first pull) and
// the shard's look names a backlog of the queue (firstuse.go) and, for
// queues with waiting clients whose shard shows group backlogs, at most
// every groupSweepEvery from the level sweep (levelsweep.go). It also makes
// sure the queue's consumer reads the heads (Dispatcher.EnsureHeads).

// groupSweepEvery spaces the sweeps of one queue's groups: each costs two
// stream info requests listing the queue's groups.
const groupSweepEvery = 10 * time.Second

// markGroups notes that the queue has ordered groups.
func (q *Queue) markGroups() {
	q.mu.Lock()
	q.groups = true
	q.mu.Unlock()
}

// sweepGroups asks the core to give a head to the queue's groups that have
// none; unless now, at most every groupSweepEvery. It runs on the caller's
// goroutine.
func (q *Queue) sweepGroups(now bool) {
	if q.d.rules.Groups == nil {
		return
	}
	q.mu.Lock()
	if !now && (!q.groups || time.Since(q.lastGroupSweep) < groupSweepEvery) {
		q.mu.Unlock()
		return
	}
	q.lastGroupSweep = time.Now()
	q.mu.Unlock()
	q.d.within(func(context.Context) {
		if q.d.rules.Groups(q.name) {
			q.markGroups()
		}
	})
}

// MarkGroups notes that the queue has ordered groups (a push into one), so
// that the periodic sweep covers it.
func (d *Dispatcher) MarkGroups(queue string) {
	if q := d.queues.local(queue); q != nil {
		q.markGroups()
	}
}
