package dispatch

import (
	"context"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// A queue's first use here (its consumer made: the first pull, also after a
// restart or after JetStream removed it unused) needs what its shard holds
// of it that no event told this gateway: priority levels with messages
// (pushed before a restart, or through another gateway) and ordered groups
// with a backlog (possibly left without a head by a gateway that stopped).
// Both come from the shard's look (store.LookAtShard), the one the level
// sweep and pull-any share, at most RepollInterval old: a burst of first
// pulls over many queues of a shard costs one look (three stream info
// requests) per RepollInterval instead of two stream info requests per
// queue (its priority subjects, its group backlogs), which at 10,000 queues
// made a first pull cost about twice the CPU of a warm one.
//
// What the look's age can hide: a message of a priority stored since it
// was taken. Pushed through this gateway, or through another one while the
// queue had state here, it marked its level (notifications); one notified
// before the queue had state here is kept for a while (below) and taken by
// the state when it is made; a t=0 pull of a queue without a consumer looks
// at its levels itself (queueEmpty). Levels filled without any event (a
// delay coming due, a NATS program) are found by the level sweep within
// RepollInterval, as for a queue in use. A group left without a head since
// the look is found by the periodic group sweep (groups.go).
//
// The same look spares a no-wait first pull its look at whether the queue
// is empty when it names messages of the queue (lately).

// lookAtShard returns a look at the queue's shard at most RepollInterval old
// (nil when it failed).
func (q *Queue) lookAtShard(ctx context.Context) *store.ShardLook {
	look, err := q.d.store.Shards().LookAtShard(ctx, mapping.Shard(q.name), time.Now().Add(-q.d.cfg.RepollInterval))
	if err != nil {
		q.d.log.Debug("looking at the queue's shard failed", "queue", q.name, "err", err)
		return nil
	}
	return look
}

// lately reports whether the shard's last look, if at most RepollInterval
// old, saw messages of the queue: a no-wait pull then makes the consumer
// without first asking whether the queue is empty (Pull). Wrong only when
// the queue was emptied since, which costs a consumer made for nothing; an
// empty answer always comes from a fresh look.
func (q *Queue) lately() bool {
	look := q.d.store.Shards().CachedShardLook(mapping.Shard(q.name), time.Now().Add(-q.d.cfg.RepollInterval))
	return look != nil && look.Counts[q.enc] > 0
}

// Priority levels notified for queues this gateway has no state of yet:
// the shard's look at a queue's first use may be up to RepollInterval old,
// so a message of a priority pushed through another gateway just before
// (whose notification found no queue state here) would be missed by the
// first pull until the level sweep. Such notifications are kept for
// recentKeep and taken by the queue's state when it is made (bind).

// recentLevels is the levels notified for a queue without state.
type recentLevels struct {
	mask uint16
	at   time.Time
}

// maxRecent bounds the queues remembered; beyond it the oldest go.
const maxRecent = 4096

// recentKeep is how long a notified level is remembered.
func (l *locals) recentKeep() time.Duration { return 2 * l.d.cfg.RepollInterval }

// rememberLevel notes a notification of level p ≥ 1 for a queue without
// state here.
func (l *locals) rememberLevel(enc string, p int) {
	if p <= 0 || p > mapping.MaxPriority {
		return
	}
	now := time.Now()
	l.recentMu.Lock()
	defer l.recentMu.Unlock()
	if l.recent == nil {
		l.recent = make(map[string]recentLevels)
	}
	if _, ok := l.recent[enc]; !ok && len(l.recent) >= maxRecent {
		for k, r := range l.recent {
			if now.Sub(r.at) >= l.recentKeep() {
				delete(l.recent, k)
			}
		}
		if len(l.recent) >= maxRecent {
			clear(l.recent) // the level sweep finds them
		}
	}
	r := l.recent[enc]
	r.mask |= 1 << p
	r.at = now
	l.recent[enc] = r
}

// takeRecent returns (and forgets) the levels lately notified for the
// queue.
func (l *locals) takeRecent(enc string) uint16 {
	l.recentMu.Lock()
	defer l.recentMu.Unlock()
	r, ok := l.recent[enc]
	if !ok {
		return 0
	}
	delete(l.recent, enc)
	if time.Since(r.at) >= l.recentKeep() {
		return 0
	}
	return r.mask
}

// NotifiedBeforeUse is the mask of priority levels notified for queue while
// it had no state here, kept for its first use (1<<p for level p); a test
// waits on it instead of sleeping.
func (d *Dispatcher) NotifiedBeforeUse(queue string) uint16 {
	l := d.queues
	l.recentMu.Lock()
	defer l.recentMu.Unlock()
	return l.recent[mapping.EncodeName(queue)].mask
}
