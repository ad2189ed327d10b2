package dispatch

// Priorities (beyond LMQ): a message of priority p ≥ 1 lives on its queue's
// subject mapping.PrioritySubject(queue, p) in the same shard stream, and
// each level has its own durable consumer (mapping.PriorityConsumerName),
// made when the level is first pulled from and removed by JetStream's
// InactiveThreshold like the queue's own. Priority 0 is the queue's plain
// subject and consumer, so a queue that never sees a priority takes exactly
// the path it took before priorities existed: its dispatcher's level mask
// stays empty and every pull request goes to the plain consumer.
//
// Strict priority: the dispatcher still keeps one no_wait pull request per
// queue in flight, sent to the highest level that may hold messages (the
// mask); an empty answer clears that level and the next request goes one
// level down, down to 0. A pull thus costs one request per level it finds
// empty on the way, and only while levels are marked. Levels are marked by
// local pushes and releases, by notifications (their payload carries the
// priority), and by a look at the stream's subject counts when a queue's
// consumer is made (a restart; the shard's shared look, firstuse.go) and when
// a notification does not say the priority (probeLocked: a delay coming
// due, an accumulation window closing); behind them all, a periodic sweep of the busy queues' shards
// (levelsweep.go) finds levels that filled without any event. Within a
// level LMQ's order holds: a release re-publishes the copy to the tail of
// the message's own subject.

import (
	"context"
	"fmt"
	"math/bits"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// prioState is a dispatcher's view of its queue's priority levels, guarded by
// Queue.mu. The zero value is a queue that never used priorities.
type prioState struct {
	seen    bool   // a priority was seen on the queue: a notification without one probes its levels
	mask    uint16 // bit p: level p (≥ 1) may hold messages
	ready   uint16 // bit p: level p's consumer exists, as far as we know
	making  bool   // a level's consumer is being made: no request meanwhile
	probing bool   // a look at the levels' counts is under way
	// fresh: levels marked since the request in flight was sent; its empty
	// answer may predate their message, so it does not unmark them.
	fresh uint16
	// notified[p]: the last notification of a message of level p ≥ 1 (for
	// level 0, Queue.lastNotify); unsettled: levels notified since
	// their last request (settleLevelLocked).
	notified  [mapping.MaxPriority + 1]time.Time
	unsettled uint16
	reqSub    [mapping.MaxPriority + 1]string
}

// top is the highest marked level, 0 when none is.
func (s *prioState) top() int { return bits.Len16(s.mask) - 1 }

// markLevelLocked notes that level p may hold a message.
func (q *Queue) markLevelLocked(p int) {
	if p > 0 {
		q.prio.seen = true
		q.prio.mask |= 1 << p
		q.prio.fresh |= 1 << p
	}
}

// levelRequestLocked returns the level the next pull request goes to and its
// subject; ok is false when that level's consumer must be made first (it is
// then being made, and the queue kicked again when it exists).
func (q *Queue) levelRequestLocked() (level int, subject string, ok bool) {
	if q.prio.making {
		return 0, "", false
	}
	level = q.prio.top()
	if level <= 0 {
		return 0, q.reqSub, true
	}
	if q.prio.ready&(1<<level) == 0 {
		q.makeLevelLocked(level)
		return 0, "", false
	}
	if q.prio.reqSub[level] == "" {
		q.prio.reqSub[level] = q.d.store.PullSubject(q.name, level)
	}
	return level, q.prio.reqSub[level], true
}

// settleLevelLocked reports whether a request to level p ≥ 1 should wait a
// moment for a message just notified (see kickLocked): only the first
// request after a notification of that level does.
func (q *Queue) settleLevelLocked(p int) bool {
	pending := q.prio.unsettled&(1<<p) != 0
	q.prio.unsettled &^= 1 << p
	return pending && time.Since(q.prio.notified[p]) < recentPush
}

// makeLevelLocked makes level p's consumer in the background (no JetStream
// request under q.mu) and kicks the queue again once it exists.
func (q *Queue) makeLevelLocked(p int) {
	q.prio.making = true
	ackWait := q.ackWait
	started := q.d.spawn(func(life context.Context) {
		ctx, cancel := context.WithTimeout(life, opTimeout)
		defer cancel()
		err := q.makeLevel(ctx, p, ackWait)
		q.mu.Lock()
		defer q.mu.Unlock()
		q.prio.making = false
		if err != nil {
			if n, ok := q.d.noise.Allow("creating priority consumer failed"); ok {
				q.d.log.Warn("creating priority consumer failed", "queue", q.name, "priority", p, "err", err, "suppressed", n)
			}
			q.d.wakes.At(wakeTarget{q: q}, time.Now().Add(time.Second))
			return
		}
		q.prio.ready |= 1 << p
		q.kickLocked()
	})
	if !started {
		q.prio.making = false // closing
	}
}

// makeLevel creates (or updates) level p's consumer.
func (q *Queue) makeLevel(ctx context.Context, p int, ackWait time.Duration) error {
	eff := q.d.props.Effective(q.name)
	ackWait = max(ackWait, store.Backstop(eff.TimeoutDuration()))
	_, err := q.d.store.Consumers().MakeConsumer(ctx, q.name, p, store.Limits{AckWait: ackWait, MaxInflight: eff.MaxInflight})
	return err
}

// levelEmptyLocked handles an empty answer of a request to level p ≥ 1: the
// level is unmarked and the next request goes one level down. It reports
// whether it did (fetchDone stops there).
func (q *Queue) levelEmptyLocked(fr *fetchReq) bool {
	if fr.level <= 0 {
		return false
	}
	if q.prio.fresh&(1<<fr.level) == 0 {
		q.prio.mask &^= 1 << fr.level
	}
	q.kickLocked()
	return true
}

// levelMissingLocked forgets level p's consumer, which JetStream no longer
// has (removed when idle); the next request to the level makes it again.
func (q *Queue) levelMissingLocked(p int) { q.prio.ready &^= 1 << p }

// probeLocked looks at the queue's priority subjects' counts in the
// background and marks the levels holding messages, then kicks the queue.
func (q *Queue) probeLocked() {
	if q.prio.probing || q.dead {
		return
	}
	q.prio.probing = true
	started := q.d.spawn(func(life context.Context) {
		ctx, cancel := context.WithTimeout(life, opTimeout)
		defer cancel()
		mask, err := q.storedLevels(ctx)
		q.mu.Lock()
		defer q.mu.Unlock()
		q.prio.probing = false
		if err != nil {
			return // the next sweep looks again (levelsweep.go)
		}
		q.markStoredLevelsLocked(mask)
	})
	if !started {
		q.prio.probing = false
	}
}

// storedLevels returns the levels ≥ 1 holding messages (pending ones
// included), from one stream info request filtered to the queue's priority
// subjects.
func (q *Queue) storedLevels(ctx context.Context) (uint16, error) {
	sh, err := q.shardHandle(ctx)
	if err != nil {
		return 0, err
	}
	counts, err := sh.SubjectCounts(ctx, mapping.PriorityWildcard(q.name))
	if err != nil {
		return 0, fmt.Errorf("look at priorities: %w", err)
	}
	return levelsHolding(counts), nil
}

// levelsHolding is the mask of levels ≥ 1 that a stream info's per-subject
// counts show holding messages.
func levelsHolding(subjects map[string]uint64) uint16 {
	var mask uint16
	for subj, n := range subjects {
		if p, ok := mapping.SubjectPriority(subj); ok && p > 0 && n > 0 {
			mask |= 1 << p
		}
	}
	return mask
}

// markLevelsLocked marks levels found holding messages (a look's).
func (q *Queue) markLevelsLocked(mask uint16) {
	if mask != 0 {
		q.prio.seen = true
		q.prio.mask |= mask
	}
}

// learnLevels marks the levels holding messages right after the queue's
// consumer was made (a first pull, also after a restart), so that the first
// pull already sees them: from the shard's look (firstuse.go) when there is
// one, else from a look at the queue's own priority subjects.
func (q *Queue) learnLevels(ctx context.Context, look *store.ShardLook) {
	var mask uint16
	var err error
	if look != nil {
		mask = look.Levels[q.enc]
	} else {
		mask, err = q.storedLevels(ctx)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if err != nil {
		q.prio.seen = true // notifications probe; the sweep looks again
		return
	}
	q.markLevelsLocked(mask)
}

// notifyLevel wakes the queue's dispatcher for a new message of priority p.
func (q *Queue) notifyLevel(p int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.markLevelLocked(p)
	if p > 0 {
		// The settle wait (kickLocked) is for the level notified, and only
		// for the next request to it: a request to a level whose message
		// was taken meanwhile must not wait for one that is not there.
		q.prio.notified[p] = time.Now()
		q.prio.unsettled |= 1 << p
	} else {
		q.lastNotify = time.Now()
	}
	if q.fetching {
		q.dirty = true
		return
	}
	q.kickLocked()
}

// notifyPayload is a notification's payload: this gateway's id prefix (so it
// ignores its own) followed, for a priority p ≥ 1, by the byte p. Gateways of
// older versions compare the whole payload with their prefix, so to them it
// is another gateway's notification, as it should be.
func (d *Dispatcher) notifyPayload(p int) []byte {
	if p <= 0 || p > mapping.MaxPriority {
		return d.idPfx
	}
	return d.prioPfx[p]
}

// parseNotifyPayload splits a notification's payload into the sender's id
// prefix and the priority it names (0: none).
func parseNotifyPayload(data []byte, idLen int) (id []byte, p int) {
	if len(data) == idLen+1 && data[idLen] >= 1 && data[idLen] <= mapping.MaxPriority {
		return data[:idLen], int(data[idLen])
	}
	return data, 0
}
