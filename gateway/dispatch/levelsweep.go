package dispatch

import (
	"context"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// The level sweep is the periodic check behind the priority levels' marks
// (priority.go): every RepollInterval, while queues have waiting clients or
// a request out, the shard streams holding such queues are looked at (the
// per-subject counts pull-any uses, store/scan.go: one stream list, then a look
// at each shard whose messages changed) and the levels found holding
// messages are marked on those queues.
//
// The marks are otherwise set by events this gateway sees: its own pushes
// and releases, notifications, a look when a queue's consumer is made. Some
// messages arrive with no event at all: a delayed message whose schedule
// fires while no gateway holds its wake-up (the gateway that took the push
// was killed, or restarted: wake-ups live in memory), a delivery JetStream
// gives back after its AckWait, a NATS program publishing to a priority
// subject. Issue 25 found hundreds of delayed messages of priority ≥ 1
// stranded that way after a kill -9: stored, counted in the queue's size,
// never handed out, because after the restart the queue had not seen a
// priority and its re-polls asked level 0 only. The sweep runs whatever the
// queue has seen and however busy its level 0 is (a re-poll happens only
// when a queue was idle for RepollInterval, which a queue with a backlog at
// level 0 never is), so a message of any level is found within about
// RepollInterval of becoming deliverable.
//
// A level marked by the sweep that holds only deliveries in flight costs
// one empty pull request per look; the mark is cleared by that answer.

// sweepLevels marks, on the given busy queues, the levels ≥ 1 their shard
// streams say hold messages. It shares pull-any's looks (store/scan.go): one
// stream list, then a look only at the shards whose state changed since
// their last look. An unchanged state has the same messages, so a look
// taken at it stays exact however old: its counts include deliveries in
// flight, so one JetStream gives back after its AckWait (no change of
// state) is on a level the look already names.
func (d *Dispatcher) sweepLevels(states []*Queue) {
	byEnc := make(map[string]*Queue, len(states))
	seen := make(map[int]bool)
	var shards []int
	for _, q := range states {
		byEnc[q.enc] = q
		if k := mapping.Shard(q.name); !seen[k] {
			seen[k] = true
			shards = append(shards, k)
		}
	}
	d.within(func(life context.Context) {
		ctx, cancel := context.WithTimeout(life, opTimeout)
		defer cancel()
		now := time.Now()
		looks, err := d.store.Shards().LookAt(ctx, shards, now.Add(-d.cfg.RepollInterval))
		if err != nil {
			if n, ok := d.noise.Allow("priority level sweep failed"); ok {
				d.log.Warn("looking at the priority levels failed; the next sweep looks again", "err", err, "suppressed", n)
			}
			return
		}
		for _, l := range looks {
			for enc, mask := range l.Levels {
				if q := byEnc[enc]; q != nil {
					q.markStoredLevels(mask)
				}
			}
			for enc := range l.Groups {
				if q := byEnc[enc]; q != nil {
					q.markGroups()
					q.sweepGroups(false)
				}
			}
		}
	})
}

// markStoredLevels marks levels JetStream said hold messages (a probe's or a
// sweep's answer) and kicks the queue: a request in flight, whose empty
// answer may predate them, does not unmark them.
func (q *Queue) markStoredLevels(mask uint16) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.markStoredLevelsLocked(mask)
}

func (q *Queue) markStoredLevelsLocked(mask uint16) {
	if mask == 0 {
		return
	}
	q.prio.seen = true
	q.prio.mask |= mask
	q.prio.fresh |= mask
	if q.fetching {
		q.dirty = true
		return
	}
	q.kickLocked()
}

// levelSweepClock spaces the sweeps on the re-poll loop.
type levelSweepClock struct{ last time.Time }

// due reports whether a sweep is due at now, and notes it as done.
func (c *levelSweepClock) due(now time.Time, every time.Duration) bool {
	if now.Sub(c.last) < every {
		return false
	}
	c.last = now
	return true
}
