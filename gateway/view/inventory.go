package view

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// What JetStream knows about queues, for introspection and statistics. A
// queue's counts are its subjects' counts in its shard stream; its in-flight
// count is its consumer's (none while it has no consumer: nothing is in
// flight then). One look at every shard answers for every queue at once
// (Statuses), so listing 10,000 queues costs about 64 requests.

// QueueInfo is what JetStream knows about a queue.
type QueueInfo struct {
	Name string
	// Size counts messages waiting and in flight (LMQ's size), compound
	// messages as one; parts of open accumulation windows are not counted.
	Size uint64
	// Bytes is an estimate of the bytes stored for the queue: its share of
	// its shard stream's bytes by message count (JetStream counts bytes per
	// stream, not per subject).
	Bytes uint64
	// InFlight are messages delivered and not yet acked.
	InFlight uint64
	// Delayed messages not yet due.
	Delayed uint64
	// DeadLetters kept for the queue.
	DeadLetters uint64
	// Parts waiting in open accumulation windows.
	Parts uint64
	// Props are the effective properties.
	Props mapping.Effective
}

// QueueDetail is the introspection view of one queue.
type QueueDetail = QueueInfo

// QueueStatus is QueueInfo plus where the queue's stream is stored.
type QueueStatus struct {
	QueueInfo
	// Nodes are the NATS servers storing the queue's stream, leader first;
	// empty outside a cluster.
	Nodes []string
	// Current lists the Nodes that are up to date.
	Current []string
	// Silent lists the Nodes (leader aside) that the stream's leader has
	// not heard from within ReplicaSilence: gone, as far as it can tell.
	Silent []string
	// Err is set (and the counts are zero) when the queue's shard stream did
	// not answer, in Statuses: one offline stream does not hide the
	// other queues.
	Err error
}

// Status returns JetStream's view of one queue with its placement;
// ErrNotFound if it does not exist.
func (r *Reader) Status(ctx context.Context, queue string) (QueueStatus, error) {
	sh, err := r.core.Shard(ctx, queue)
	if err != nil {
		return QueueStatus{}, err
	}
	enc := mapping.EncodeName(queue)
	var info *store.ShardInfo
	counts := make(map[string]*QueueInfo)
	var levels []int // priorities holding messages, in flight ones included
	for _, filter := range mapping.QueueSubjects(queue) {
		if info, err = sh.Info(ctx, filter); err != nil {
			return QueueStatus{}, fmt.Errorf("queue info: %w", err)
		}
		addCounts(counts, info.Subjects)
		for subj, n := range info.Subjects {
			if p, ok := mapping.SubjectPriority(subj); ok && p > 0 && n > 0 {
				levels = append(levels, p)
			}
		}
	}
	s := QueueStatus{Nodes: []string{}, Current: []string{}}
	if c := counts[enc]; c != nil {
		s.QueueInfo = *c
	}
	s.Name, s.Props = queue, r.core.Props(queue)
	s.Bytes = shareOf(info, s.Size+s.Delayed+s.DeadLetters+s.Parts)
	if c, found, err := sh.Consumer(ctx, mapping.ConsumerName(queue)); err == nil && found {
		s.InFlight = uint64(c.AckPending)
	}
	for _, p := range levels {
		if c, found, err := sh.Consumer(ctx, mapping.PriorityConsumerName(queue, p)); err == nil && found {
			s.InFlight += uint64(c.AckPending)
		}
	}
	s.Nodes, s.Current, s.Silent = placement(info)
	return s, nil
}

// shardViewTimeout bounds Statuses' look at one shard stream. A stream
// whose leader vanished without closing its connections (a lost machine, a
// frozen process) answers nothing until its replicas have elected another,
// seconds later; without a bound of its own it would hold /stats, the status
// command and the console for their whole bound (30 s), just when someone
// looks at what is down. Its queues are reported with Err meanwhile.
const shardViewTimeout = 3 * time.Second

// lookWorkers bounds the shard requests of one Statuses in flight at once,
// as the store's scans do.
const lookWorkers = 8

// Statuses returns the view of every existing queue for which allows
// returns true (nil: all), sorted by name, from one look at each shard
// stream and its consumers. A queue whose shard did not answer has Err set.
func (r *Reader) Statuses(ctx context.Context, allows func(queue string) bool) ([]QueueStatus, error) {
	if allows == nil {
		allows = func(string) bool { return true }
	}
	names := r.core.Names()
	// The shards of the queues that exist, looked up if this gateway has
	// not used them (another gateway made them).
	shards := make(map[int]bool)
	for _, name := range names {
		if allows(name) {
			shards[mapping.Shard(name)] = true
		}
	}
	type shardView struct {
		info     *store.ShardInfo
		counts   map[string]*QueueInfo
		inFlight map[string]uint64
		err      error
	}
	views := make(map[int]*shardView, len(shards))
	var mu sync.Mutex
	sem := make(chan struct{}, lookWorkers)
	var wg sync.WaitGroup
	for k := range shards {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(ctx, shardViewTimeout)
			defer cancel()
			v := &shardView{counts: make(map[string]*QueueInfo), inFlight: make(map[string]uint64)}
			sh, err := r.core.Store.Shards().LookupShard(ctx, k)
			switch {
			case err != nil:
				v.err = err
			case sh == nil: // no message was ever stored in the shard
				v.info = &store.ShardInfo{}
			default:
				v.info, v.err = sh.Info(ctx, mapping.SubjectPrefix+".>")
			}
			if v.err == nil {
				addCounts(v.counts, v.info.Subjects)
			}
			if v.err == nil && sh != nil && v.info.Consumers > 0 { // queues in use
				var cs []store.ConsumerState
				cs, v.err = sh.Consumers(ctx)
				for _, c := range cs {
					// Filter is the queue's own subject (beside its
					// groups' heads), or a priority level's.
					if _, enc, ok := mapping.ParseSubject(c.Filter); ok {
						v.inFlight[enc] += uint64(c.AckPending) // a consumer per priority
					}
				}
			}
			mu.Lock()
			views[k] = v
			mu.Unlock()
		})
	}
	wg.Wait()
	out := make([]QueueStatus, 0, len(names))
	for _, name := range names {
		if !allows(name) {
			continue
		}
		s := QueueStatus{Nodes: []string{}, Current: []string{}}
		enc := mapping.EncodeName(name)
		if v := views[mapping.Shard(name)]; v != nil && v.err != nil {
			s.Err = fmt.Errorf("queue statistics: %w", v.err) // classified by the store
		} else if v != nil {
			if c := v.counts[enc]; c != nil {
				s.QueueInfo = *c
			}
			s.InFlight = v.inFlight[enc]
			s.Bytes = shareOf(v.info, s.Size+s.Delayed+s.DeadLetters+s.Parts)
			s.Nodes, s.Current, s.Silent = placement(v.info)
		}
		s.Name, s.Props = name, r.core.Props(name)
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// addCounts adds a shard's per-subject counts to the queues' sizes by kind.
func addCounts(into map[string]*QueueInfo, subjects map[string]uint64) {
	for subj, n := range subjects {
		kind, enc, ok := mapping.ParseSubject(subj)
		if !ok {
			continue
		}
		c := into[enc]
		if c == nil {
			c = &QueueInfo{}
			into[enc] = c
		}
		switch {
		case mapping.CountsWaiting(kind): // priorities and groups' backlogs too
			c.Size += n
		case kind == "h":
			// A group's head is a copy of its backlog's oldest message,
			// which is counted already.
		case kind == "s":
			c.Delayed += n
		case kind == "d":
			c.DeadLetters += n
		case kind == "a":
			c.Parts += n
		}
	}
}

// shareOf estimates the bytes of msgs messages of a stream by its average.
func shareOf(st *store.ShardInfo, msgs uint64) uint64 {
	if st.Msgs == 0 || msgs == 0 {
		return 0
	}
	return uint64(float64(st.Bytes) * float64(min(msgs, st.Msgs)) / float64(st.Msgs))
}

// ReplicaSilence is how long a Raft leader (a stream's, or the JetStream
// meta group's) may go without hearing from a replica before that replica
// counts as gone: leaders hear from each replica about every second (Raft
// heartbeats), so this leaves room for a busy server and still shows a lost
// one down well within 10 s. JetStream itself calls a replica current for
// 10 s of silence, and offline only minutes later.
const ReplicaSilence = 5 * time.Second

// placement lists a stream's servers, leader first, those up to date
// (current by JetStream's word and heard from by the stream's leader, which
// answers stream info, within ReplicaSilence), and those the leader has not
// heard from for longer.
func placement(info *store.ShardInfo) (nodes, current, silent []string) {
	nodes, current = []string{}, []string{}
	ci := info.Cluster
	if ci == nil {
		return nodes, current, nil
	}
	if ci.Leader != "" {
		nodes = append(nodes, ci.Leader)
		current = append(current, ci.Leader)
	}
	// How long the leader has led, by its own clock (the answer's time).
	var led time.Duration
	if !ci.LeaderSince.IsZero() && !info.At.IsZero() {
		led = info.At.Sub(ci.LeaderSince)
	}
	for _, p := range ci.Replicas {
		nodes = append(nodes, p.Name)
		if p.Current && !p.Offline && p.Active <= ReplicaSilence {
			current = append(current, p.Name)
		}
		// Active 0 is "not heard from since": a leader elected after the
		// replica went silent (or that forgot, as followers do, when it
		// last heard from the other followers) has no time to give. One
		// that has led longer than ReplicaSilence hears from a live
		// replica every second, so silence that long is silence.
		unheard := p.Active == 0 && !p.Current && led > ReplicaSilence
		if ci.Leader != "" && (p.Active > ReplicaSilence || unheard) {
			silent = append(silent, p.Name)
		}
	}
	return nodes, current, silent
}
