package gateway

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// scanCache is the last look at which queues of each shard hold messages:
// the shard stream's per-subject counts of deliverable messages (in flight
// included, a WorkQueue stream keeps a message until it is acked). One look
// serves every pull-any of this gateway for a while, and a shard is looked
// at once at a time.
type scanCache struct {
	mu     sync.Mutex
	shards map[int]*shardScan
}

type shardScan struct {
	at      time.Time         // when the last look started
	counts  map[string]uint64 // encoded queue name → messages, from it
	running chan struct{}     // closed when the running look ends; nil if none
	since   time.Time         // when the running look started
}

// scanWorkers bounds the shard requests of one scan in flight at once.
const scanWorkers = 8

// nonEmpty returns the messages per encoded queue name in the given shards,
// from looks started at most maxAge before the call (0: after it).
func (r *registry) nonEmpty(ctx context.Context, shards []int, maxAge time.Duration) (map[string]uint64, error) {
	oldest := time.Now().Add(-maxAge)
	counts := make(map[string]uint64)
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, scanWorkers)
	var wg sync.WaitGroup
	for _, k := range shards {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := r.scanShard(ctx, k, oldest)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			for enc, n := range c {
				counts[enc] += n
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return counts, nil
}

// scanShard returns shard k's counts from a look started at oldest or later.
func (r *registry) scanShard(ctx context.Context, k int, oldest time.Time) (map[string]uint64, error) {
	c := &r.scan
	for {
		c.mu.Lock()
		if c.shards == nil {
			c.shards = make(map[int]*shardScan)
		}
		s := c.shards[k]
		if s == nil {
			s = &shardScan{}
			c.shards[k] = s
		}
		if s.counts != nil && !s.at.Before(oldest) {
			out := s.counts
			c.mu.Unlock()
			return out, nil
		}
		if running := s.running; running != nil {
			c.mu.Unlock()
			select {
			case <-running: // its result, or a newer look, serves on the next turn
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done, started := make(chan struct{}), time.Now()
		s.running, s.since = done, started
		c.mu.Unlock()
		// The look serves every waiter: it runs with its own deadline, not
		// the first caller's context.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		counts, err := r.lookAtShard(sctx, k)
		cancel()
		c.mu.Lock()
		s.running = nil
		if err == nil {
			s.counts, s.at = counts, started
		}
		c.mu.Unlock()
		close(done)
		if err != nil {
			return nil, err
		}
		return counts, nil
	}
}

// lookAtShard asks shard k's stream for its queues' counts of deliverable
// messages.
func (r *registry) lookAtShard(ctx context.Context, k int) (map[string]uint64, error) {
	counts := make(map[string]uint64)
	st, err := r.lookupShard(ctx, k)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return counts, nil // not created yet: no messages
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(mapping.ShardQueueWildcard(k)))
	if err != nil {
		return nil, jsErr("scan queues", err)
	}
	for subj, n := range info.State.Subjects {
		if _, enc, ok := mapping.ParseSubject(subj); ok && n > 0 {
			counts[enc] += n
		}
	}
	// Messages of priorities count too (a second filter: one covering both
	// would also list every delayed message's schedule subject). Pull-any
	// does not order queues by priority; each queue's pull does.
	info, err = st.Info(ctx, jetstream.WithSubjectFilter(mapping.ShardPriorityWildcard(k)))
	if err != nil {
		return nil, jsErr("scan queues", err)
	}
	for subj, n := range info.State.Subjects {
		if _, enc, ok := mapping.ParseSubject(subj); ok && n > 0 {
			counts[enc] += n
		}
	}
	return counts, nil
}

// withMessages returns the queues matching w that hold messages, sorted,
// from looks at their shards started at most maxAge before the call (0:
// after it). It looks at the shards of the matching queues this gateway
// knows; a queue's name comes from its subject (the encoding is
// reversible), so one created a moment ago through another gateway counts
// too if its shard is looked at.
func (r *registry) withMessages(ctx context.Context, w *anyWaiter, maxAge time.Duration) ([]string, error) {
	seen := make(map[int]bool)
	var shards []int
	r.mu.Lock()
	for _, name := range r.known {
		if k := mapping.Shard(name); !seen[k] && w.matches(name) {
			seen[k] = true
			shards = append(shards, k)
		}
	}
	r.mu.Unlock()
	counts, err := r.nonEmpty(ctx, shards, maxAge)
	if err != nil {
		return nil, err
	}
	var out []string
	for enc := range counts {
		if name, ok := mapping.DecodeName(enc); ok && w.matches(name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (r *registry) addAny(w *anyWaiter) {
	r.mu.Lock()
	r.anyWait[w] = struct{}{}
	r.anyCount.Add(1)
	r.mu.Unlock()
}

func (r *registry) removeAny(w *anyWaiter) {
	r.mu.Lock()
	if _, ok := r.anyWait[w]; ok {
		delete(r.anyWait, w)
		r.anyCount.Add(-1)
	}
	r.mu.Unlock()
}

// notifyAny tells the waiting pull-anys that the queue (by encoded name)
// has a message. Without any waiting it costs one atomic load.
func (r *registry) notifyAny(enc string) {
	if r.anyCount.Load() == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	name, ok := r.known[enc]
	if !ok {
		return
	}
	for w := range r.anyWait {
		w.hit(name)
	}
}
