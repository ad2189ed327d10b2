package ops

import (
	"context"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// StatsOptions configures Stats. The zero value is usable.
type StatsOptions struct {
	// ReservoirSize bounds the retention sample of each queue per window
	// period (default 1028, folsom's).
	ReservoirSize int
	// RetentionWindow is the period of the retention sample (default 1m):
	// /stats reports retention over the last one to two periods.
	RetentionWindow time.Duration
	// RetentionBuckets are the upper bounds, in seconds, of the push→pull
	// latency histogram exported to Prometheus (default DefaultRetentionBuckets).
	RetentionBuckets []float64
	// StatsdSamples bounds the retention timings kept per queue between two
	// StatsD flushes (default 100); more are sampled.
	StatsdSamples int
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time
}

// DefaultRetentionBuckets span a local hand-over (milliseconds) to a queue an
// hour behind.
func DefaultRetentionBuckets() []float64 {
	return []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600}
}

// Stats collects this gateway's per-queue events: it is the core's
// gateway.Observer. Its methods are called on the core's hot paths, so they
// only touch atomics and, for a pull, one short per-queue lock.
type Stats struct {
	opt    StatsOptions
	now    func() time.Time
	start  time.Time
	queues sync.Map // queue name → *queueStats
}

var _ gateway.Observer = (*Stats)(nil)

// queueStats are one queue's counters, meters and retention sample.
type queueStats struct {
	push, pull                     *meter
	pushBytes                      atomic.Uint64
	acks, nacks, exts              atomic.Uint64
	timeouts, discarded            atomic.Uint64
	lastUsed                       atomic.Int64 // unix nanoseconds
	mu                             sync.Mutex
	ret                            window
	buckets                        []uint64 // per bucket, not cumulative; last is +Inf
	retSum                         float64
	retCount                       uint64
	statsd                         []float64 // retention seconds since the last StatsD flush
	statsdSeen                     int
	statsdPushSent, statsdPullSent uint64
}

// NewStats returns an empty Stats.
func NewStats(opt StatsOptions) *Stats {
	if opt.ReservoirSize <= 0 {
		opt.ReservoirSize = 1028
	}
	if opt.RetentionWindow <= 0 {
		opt.RetentionWindow = time.Minute
	}
	if len(opt.RetentionBuckets) == 0 {
		opt.RetentionBuckets = DefaultRetentionBuckets()
	}
	if opt.StatsdSamples <= 0 {
		opt.StatsdSamples = 100
	}
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	return &Stats{opt: opt, now: now, start: now()}
}

func (s *Stats) queue(name string) *queueStats {
	if q, ok := s.queues.Load(name); ok {
		return q.(*queueStats)
	}
	// The meters' mean rate is since the gateway started, not since the
	// queue's first event (which would make it huge at first).
	q := &queueStats{
		push:    newMeter(s.start),
		pull:    newMeter(s.start),
		ret:     newWindow(s.opt.ReservoirSize, s.opt.RetentionWindow, s.now()),
		buckets: make([]uint64, len(s.opt.RetentionBuckets)+1),
	}
	actual, _ := s.queues.LoadOrStore(name, q)
	return actual.(*queueStats)
}

func (s *Stats) touch(q *queueStats) { q.lastUsed.Store(s.now().UnixNano()) }

// Pushed implements gateway.Observer.
func (s *Stats) Pushed(queue string, bytes int) {
	q := s.queue(queue)
	q.push.mark(1)
	q.pushBytes.Add(uint64(max(bytes, 0)))
	s.touch(q)
}

// Pulled implements gateway.Observer.
func (s *Stats) Pulled(queue string, retention time.Duration) {
	q := s.queue(queue)
	q.pull.mark(1)
	s.touch(q)
	sec := max(retention.Seconds(), 0) // clocks of two gateways may disagree a little
	i := sort.SearchFloat64s(s.opt.RetentionBuckets, sec)
	q.mu.Lock()
	q.ret.add(sec, s.now())
	q.buckets[i]++
	q.retSum += sec
	q.retCount++
	q.statsdSeen++
	if len(q.statsd) < s.opt.StatsdSamples {
		q.statsd = append(q.statsd, sec)
	} else if j := rand.IntN(q.statsdSeen); j < len(q.statsd) {
		// A uniform reservoir; the flush reports the sample rate.
		q.statsd[j] = sec
	}
	q.mu.Unlock()
}

// Replied implements gateway.Observer.
func (s *Stats) Replied(queue string, kind gateway.ReplyKind) {
	q := s.queue(queue)
	switch kind {
	case gateway.Ack:
		q.acks.Add(1)
	case gateway.Nack:
		q.nacks.Add(1)
	case gateway.Ext:
		q.exts.Add(1)
	}
	s.touch(q)
}

// TimedOut implements gateway.Observer.
func (s *Stats) TimedOut(queue string) {
	q := s.queue(queue)
	q.timeouts.Add(1)
	s.touch(q)
}

// Discarded implements gateway.Observer.
func (s *Stats) Discarded(queue string) {
	q := s.queue(queue)
	q.discarded.Add(1)
	s.touch(q)
}

// Tick folds the events since the last tick into every meter's rates. Run
// calls it every TickInterval.
func (s *Stats) Tick() {
	s.queues.Range(func(_, v any) bool {
		q := v.(*queueStats)
		q.push.tick()
		q.pull.tick()
		return true
	})
}

// Prune forgets the queues that are not in exists and saw no event for
// idle, so that deleted queues do not stay in /stats and /metrics forever.
func (s *Stats) Prune(exists []string, idle time.Duration) {
	keep := make(map[string]bool, len(exists))
	for _, n := range exists {
		keep[n] = true
	}
	cutoff := s.now().Add(-idle).UnixNano()
	s.queues.Range(func(k, v any) bool {
		if !keep[k.(string)] && v.(*queueStats).lastUsed.Load() < cutoff {
			s.queues.Delete(k)
		}
		return true
	})
}

// Run ticks the meters every TickInterval and prunes deleted queues every
// minute, until ctx ends. names lists the existing queues.
func (s *Stats) Run(ctx context.Context, names func() []string) {
	t := time.NewTicker(TickInterval)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.Tick()
		if n%12 == 0 && names != nil {
			s.Prune(names(), time.Minute)
		}
	}
}

// QueueStats is one queue's statistics in LMQ's /stats shape.
type QueueStats struct {
	Push      MeterSnapshot `json:"push"`
	Pull      MeterSnapshot `json:"pull"`
	Retention Summary       `json:"retention"`
}

// Queue returns the statistics of a queue; a queue without events has zero
// counts and rates.
func (s *Stats) Queue(name string) QueueStats {
	now := s.now()
	v, ok := s.queues.Load(name)
	if !ok {
		return QueueStats{Retention: summarize(nil)}
	}
	q := v.(*queueStats)
	q.mu.Lock()
	vals := q.ret.values(now)
	q.mu.Unlock()
	return QueueStats{
		Push:      q.push.snapshot(now),
		Pull:      q.pull.snapshot(now),
		Retention: summarize(vals),
	}
}

// Counters are one queue's event counts since the gateway started.
type Counters struct {
	Pushes, PushBytes, Pulls               uint64
	Acks, Nacks, Exts, Timeouts, Discarded uint64
	// RetentionBuckets are the cumulative counts of the push→pull latency
	// histogram, by StatsOptions.RetentionBuckets (without +Inf, which is
	// RetentionCount).
	RetentionBuckets []uint64
	RetentionSum     float64
	RetentionCount   uint64
}

// Each calls f with the counters of every queue that saw an event.
func (s *Stats) Each(f func(queue string, c Counters)) {
	s.queues.Range(func(k, v any) bool {
		q := v.(*queueStats)
		c := Counters{
			Pushes:    q.push.count.Load(),
			PushBytes: q.pushBytes.Load(),
			Pulls:     q.pull.count.Load(),
			Acks:      q.acks.Load(),
			Nacks:     q.nacks.Load(),
			Exts:      q.exts.Load(),
			Timeouts:  q.timeouts.Load(),
			Discarded: q.discarded.Load(),
		}
		q.mu.Lock()
		c.RetentionBuckets = make([]uint64, len(q.buckets)-1)
		var cum uint64
		for i := range c.RetentionBuckets {
			cum += q.buckets[i]
			c.RetentionBuckets[i] = cum
		}
		c.RetentionSum, c.RetentionCount = q.retSum, q.retCount
		q.mu.Unlock()
		f(k.(string), c)
		return true
	})
}

// RetentionBuckets are the histogram's upper bounds in seconds.
func (s *Stats) RetentionBuckets() []float64 { return s.opt.RetentionBuckets }

// statsdDelta is what a StatsD flush sends for one queue.
type statsdDelta struct {
	pushes, pulls uint64
	retention     []float64
	rate          float64 // sample rate of retention
}

// takeStatsd returns, per queue, the events since the previous call.
func (s *Stats) takeStatsd(f func(queue string, d statsdDelta)) {
	s.queues.Range(func(k, v any) bool {
		q := v.(*queueStats)
		push, pull := q.push.count.Load(), q.pull.count.Load()
		q.mu.Lock()
		d := statsdDelta{pushes: push - q.statsdPushSent, pulls: pull - q.statsdPullSent, retention: q.statsd, rate: 1}
		if q.statsdSeen > len(q.statsd) {
			d.rate = float64(len(q.statsd)) / float64(q.statsdSeen)
		}
		q.statsdPushSent, q.statsdPullSent = push, pull
		q.statsd, q.statsdSeen = nil, 0
		q.mu.Unlock()
		f(k.(string), d)
		return true
	})
}
