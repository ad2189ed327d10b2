package store

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// scanCache is the last look at which queues of each shard hold messages:
// the shard stream's per-subject counts of deliverable messages (in flight
// included, a WorkQueue stream keeps a message until it is acked). One look
// serves every pull-any of the core for a while, and a shard is looked at
// once at a time.
//
// Before looking at shards' subjects, a scan asks JetStream for the state of
// every shard stream in one request (a stream list). A shard without
// messages needs no look, and one whose state (first and last sequence,
// message count) is the state its cached counts were taken at has the same
// messages: no message was added (the last sequence would have grown) and
// none removed (the count would have dropped). So a pull-any waiting over
// thousands of empty queues costs one small request per re-poll, not two
// per shard.
type scanCache struct {
	mu     sync.Mutex
	shards map[int]*shardScan
	states stateList
}

type shardScan struct {
	at      time.Time     // when the last look started
	look    *ShardLook    // its result
	sig     shardSig      // the stream's state the look was taken at
	running chan struct{} // closed when the running look ends; nil if none
	since   time.Time     // when the running look started
}

// ShardLook is what one look at a shard found, by encoded queue name: the
// deliverable messages (the core's pull-any) and the priority levels ≥ 1
// holding some (its level sweep).
type ShardLook struct {
	Counts map[string]uint64 // messages, in flight ones included
	Levels map[string]uint16 // bit p set: level p holds messages
	// Groups holds the queues with messages in ordered groups' backlogs
	// (the dispatcher's group sweep).
	Groups map[string]bool
}

// shardSig is what tells that a stream's messages changed.
type shardSig struct{ first, last, msgs uint64 }

// stateList is the last stream list: every shard stream's state.
type stateList struct {
	at      time.Time        // when the last list started
	sigs    map[int]shardSig // shard → state; a missing shard has no stream
	running chan struct{}    // closed when the running list ends; nil if none
}

// scanWorkers bounds the shard requests of one scan in flight at once.
const scanWorkers = 8

// lookTimeout bounds a stream list or a look at a shard, which serves
// every caller waiting for it and so runs on its own deadline.
const lookTimeout = 10 * time.Second

// QueueCounts returns the messages per encoded queue name in the given shards,
// from looks started at most maxAge before the call (0: after it).
func (h Shards) QueueCounts(ctx context.Context, shards []int, maxAge time.Duration) (map[string]uint64, error) {
	s := h.s
	oldest := time.Now().Add(-maxAge)
	looks, err := s.Shards().LookAt(ctx, shards, oldest)
	if err != nil {
		return nil, err
	}
	counts := make(map[string]uint64)
	for _, l := range looks {
		for enc, n := range l.Counts {
			counts[enc] += n
		}
	}
	return counts, nil
}

// LookAt returns the looks at the given shards that hold messages, each
// started at oldest or later, or taken at the shard's present state.
func (h Shards) LookAt(ctx context.Context, shards []int, oldest time.Time) ([]*ShardLook, error) {
	s := h.s
	if len(shards) == 0 {
		return nil, nil
	}
	sigs, err := s.shardStates(ctx, oldest)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var firstErr error
	var looks []*ShardLook
	sem := make(chan struct{}, scanWorkers)
	var wg sync.WaitGroup
	for _, k := range shards {
		sig, ok := sigs[k]
		if !ok || sig.msgs == 0 {
			continue // no stream, or no message in it
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			l, err := s.scanShard(ctx, k, oldest, sig)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			looks = append(looks, l)
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return looks, nil
}

// shardStates returns every shard stream's state from a stream list started
// at oldest or later; one list serves every caller meanwhile.
func (s *Store) shardStates(ctx context.Context, oldest time.Time) (map[int]shardSig, error) {
	c := &s.scan
	for {
		c.mu.Lock()
		l := &c.states
		if l.sigs != nil && !l.at.Before(oldest) {
			out := l.sigs
			c.mu.Unlock()
			return out, nil
		}
		if running := l.running; running != nil {
			c.mu.Unlock()
			select {
			case <-running:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done, started := make(chan struct{}), time.Now()
		l.running = done
		c.mu.Unlock()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookTimeout)
		sigs, err := s.listShards(sctx)
		cancel()
		c.mu.Lock()
		l.running = nil
		if err == nil {
			l.sigs, l.at = sigs, started
		}
		c.mu.Unlock()
		close(done)
		if err != nil {
			return nil, err
		}
		return sigs, nil
	}
}

// listShards asks JetStream for the state of every shard stream, in one
// request (paged by 256 streams: the shards and a few more fit in one).
func (s *Store) listShards(ctx context.Context) (map[int]shardSig, error) {
	sigs := make(map[int]shardSig, mapping.ShardCount)
	l := s.js.ListStreams(ctx, jetstream.WithStreamListSubject(mapping.SubjectPrefix+".q.>"))
	for info := range l.Info() {
		if k, ok := mapping.ShardFromStream(info.Config.Name); ok {
			sigs[k] = sigOf(info.State)
		}
	}
	if err := l.Err(); err != nil {
		return nil, Classify("list queue streams", err)
	}
	return sigs, nil
}

func sigOf(s jetstream.StreamState) shardSig {
	return shardSig{first: s.FirstSeq, last: s.LastSeq, msgs: s.Msgs}
}

// scanShard returns shard k's look started at oldest or later, or an older
// one taken at the state sig (the same messages).
func (s *Store) scanShard(ctx context.Context, k int, oldest time.Time, sig shardSig) (*ShardLook, error) {
	c := &s.scan
	for {
		c.mu.Lock()
		if c.shards == nil {
			c.shards = make(map[int]*shardScan)
		}
		sc := c.shards[k]
		if sc == nil {
			sc = &shardScan{}
			c.shards[k] = sc
		}
		if sc.look != nil && (!sc.at.Before(oldest) || sc.sig == sig) {
			out := sc.look
			c.mu.Unlock()
			return out, nil
		}
		if running := sc.running; running != nil {
			c.mu.Unlock()
			select {
			case <-running: // its result, or a newer look, serves on the next turn
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done, started := make(chan struct{}), time.Now()
		sc.running, sc.since = done, started
		c.mu.Unlock()
		// The look serves every waiter: it runs with its own deadline, not
		// the first caller's context.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookTimeout)
		look, at, err := s.lookAtShard(sctx, k)
		cancel()
		c.mu.Lock()
		sc.running = nil
		if err == nil {
			sc.look, sc.at, sc.sig = look, started, at
		}
		c.mu.Unlock()
		close(done)
		if err != nil {
			return nil, err
		}
		return look, nil
	}
}

// lookAtShard asks shard k's stream for its queues' counts of deliverable
// messages and their priority levels; at is the stream's state at the first
// request (a change after it shows as another state in the next list, which
// looks again).
func (s *Store) lookAtShard(ctx context.Context, k int) (look *ShardLook, at shardSig, err error) {
	look = &ShardLook{Counts: make(map[string]uint64), Levels: make(map[string]uint16), Groups: make(map[string]bool)}
	sh, err := s.Shards().LookupShard(ctx, k)
	if err != nil {
		return nil, at, err
	}
	if sh == nil {
		return look, at, nil // not created yet: no messages
	}
	st := sh.st
	// The queues' waiting messages, each counted once (mapping/waiting.go):
	// their own subjects', their priority levels' (pull-any does not order
	// queues by priority; each queue's pull does) and their groups'
	// backlogs' (a backlog holds the message its head copy stands for, so
	// a group with a head counts).
	for i, filter := range mapping.ShardWaitingFilters(k) {
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return nil, at, Classify("scan queues", err)
		}
		if i == 0 {
			at = sigOf(info.State)
		}
		for subj, n := range info.State.Subjects {
			kind, enc, ok := mapping.ParseSubject(subj)
			if !ok || n == 0 || !mapping.CountsWaiting(kind) {
				continue
			}
			look.Counts[enc] += n
			switch kind {
			case "p":
				if p, ok := mapping.SubjectPriority(subj); ok && p > 0 {
					look.Levels[enc] |= 1 << p
				}
			case "g":
				look.Groups[enc] = true
			}
		}
	}
	return look, at, nil
}

// LookAtShard returns a look at shard k started at oldest or later (one
// look serves every caller meanwhile), without the stream list LookAt
// starts with: for queues first used, whose shard exists. A burst of first
// pulls in a shard shares one look instead of asking per queue.
func (h Shards) LookAtShard(ctx context.Context, k int, oldest time.Time) (*ShardLook, error) {
	s := h.s
	// No stream state equals this one: only the look's age counts.
	return s.scanShard(ctx, k, oldest, shardSig{first: math.MaxUint64})
}

// CachedShardLook returns the last look at shard k if it started at oldest
// or later, without asking JetStream anything; nil if there is none.
func (h Shards) CachedShardLook(k int, oldest time.Time) *ShardLook {
	s := h.s
	c := &s.scan
	c.mu.Lock()
	defer c.mu.Unlock()
	if sc := c.shards[k]; sc != nil && sc.look != nil && !sc.at.Before(oldest) {
		return sc.look
	}
	return nil
}
