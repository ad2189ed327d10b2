package ops

import (
	"context"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lifecycle"
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
//
// Its periodic work (folding the meters every TickInterval, the console's
// rate sampler, StatsD flushes) visits only the queues that had events since
// its previous round, never every queue: each of them reads an activity set
// (a Watch), which an event adds its queue to once per round. A gateway with
// many idle queues then costs no CPU for them.
type Stats struct {
	opt    StatsOptions
	now    func() time.Time
	start  time.Time
	queues sync.Map // queue name → *queueStats

	// watchers are the activity sets that events add their queue to
	// (copy on write); bits hands out their bits in queueStats.in.
	watchers atomic.Pointer[watcherSet]
	regMu    sync.Mutex // serializes registrations
	bits     int

	ticks    *activity     // the queues whose meters Tick folds
	tickMu   sync.Mutex    // serializes Tick
	tickDone atomic.Uint64 // the last tick whose folds are all done
	rolled   atomic.Uint64 // queues folded by all ticks (tests)

	statsdOnce  sync.Once
	statsdWatch *Watch
}

var _ gateway.Observer = (*Stats)(nil)

// queueStats are one queue's counters, meters and retention sample.
type queueStats struct {
	name                           string
	in                             atomic.Uint64 // bits of the activity sets it is in
	forgotten                      atomic.Bool   // pruned: no longer in Stats.queues
	tickBorn                       bool          // under Stats.ticks.mu: its meters' first tick is set
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
	s := &Stats{opt: opt, now: now, start: now()}
	s.watchers.Store(&watcherSet{})
	s.ticks = s.register()
	s.ticks.onAdd = func(q *queueStats, taken uint64) {
		// The meters' first tick is the first that takes the queue from
		// this set (the original meters were ticked from their creation on:
		// the first tick after it sets their rates outright).
		if !q.tickBorn {
			q.tickBorn = true
			q.push.born(taken)
			q.pull.born(taken)
		}
	}
	return s
}

// watcherSet is the registered activity sets and their bits.
type watcherSet struct {
	list []*activity
	mask uint64
}

// maxWatchers bounds the activity sets (one bit each in queueStats.in); a
// Watch beyond it falls back to visiting every queue.
const maxWatchers = 64

// activity is the set of queues that had events since the last take. A queue
// is in it at most once: the event that sets the queue's bit adds it, and
// take clears the bits of the queues it returns. An event counts before it
// adds (or finds) its queue here, and take clears a bit before its reader
// reads the counters, so a reader never misses an event: either it is
// counted by the time of the read, or its queue is in the next take.
type activity struct {
	bit   uint64
	mu    sync.Mutex
	list  []*queueStats
	spare []*queueStats
	taken uint64 // takes so far
	// onAdd runs under mu when a queue is added, with the number of takes so
	// far.
	onAdd func(q *queueStats, taken uint64)
}

func (a *activity) add(q *queueStats) {
	a.mu.Lock()
	a.list = append(a.list, q)
	if a.onAdd != nil {
		a.onAdd(q, a.taken)
	}
	a.mu.Unlock()
}

// take returns the queues that had events since the last take, and the
// number of this take. The caller gives the slice back with done.
func (a *activity) take() ([]*queueStats, uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	list := a.list
	a.list = a.spare[:0]
	a.spare = nil
	for _, q := range list {
		q.in.And(^a.bit)
	}
	a.taken++
	return list, a.taken
}

func (a *activity) done(list []*queueStats) {
	clear(list) // let pruned queues go
	a.mu.Lock()
	if a.spare == nil && cap(list) <= 4*len(a.list)+1024 {
		// Keep a buffer for the next take, unless it is far larger than
		// the activity now (a past burst).
		a.spare = list[:0]
	}
	a.mu.Unlock()
}

// register adds an activity set that every queue known so far is in; nil
// when all bits are used.
func (s *Stats) register() *activity {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	if s.bits == maxWatchers {
		return nil
	}
	a := &activity{bit: 1 << s.bits}
	s.bits++
	old := s.watchers.Load()
	s.watchers.Store(&watcherSet{list: append(slices.Clip(old.list), a), mask: old.mask | a.bit})
	// Queues created from now on see a in the set; the ones before it are
	// added here (the Or decides who adds a queue that is both).
	s.queues.Range(func(_, v any) bool {
		q := v.(*queueStats)
		if q.in.Or(a.bit)&a.bit == 0 {
			a.add(q)
		}
		return true
	})
	return a
}

// mark adds q to the activity sets it is not in yet. Called after the event
// is counted; on the hot path it is two atomic loads.
func (s *Stats) mark(q *queueStats) {
	ws := s.watchers.Load()
	if q.in.Load()&ws.mask == ws.mask {
		return
	}
	for _, a := range ws.list {
		if q.in.Or(a.bit)&a.bit == 0 {
			a.add(q)
		}
	}
}

// Activity is what a Watch reports of a queue.
type Activity struct {
	// Pushes and Pulls are the queue's counters (as Counters').
	Pushes, Pulls uint64
	// Forgotten: Stats pruned the queue (deleted, and idle); if it is used
	// again, its counters start from zero.
	Forgotten bool
}

// Watch reports the queues that had events, for periodic readers that
// should cost nothing for idle queues.
type Watch struct {
	s *Stats
	a *activity // nil: every queue, every time (all sets in use)
}

// Watch returns a new Watch; its first Take reports every queue Stats knows.
// A Watch lives as long as Stats.
func (s *Stats) Watch() *Watch { return &Watch{s: s, a: s.register()} }

// Take calls f for every queue that had an event since the previous Take (a
// queue may be reported without a new event, never missed), and for the
// queues pruned since then (Forgotten).
func (w *Watch) Take(f func(queue string, a Activity)) {
	w.takeStats(func(q *queueStats) {
		f(q.name, Activity{Pushes: q.push.count.Load(), Pulls: q.pull.count.Load(), Forgotten: q.forgotten.Load()})
	})
}

func (w *Watch) takeStats(f func(q *queueStats)) {
	if w.a == nil {
		w.s.queues.Range(func(_, v any) bool {
			f(v.(*queueStats))
			return true
		})
		return
	}
	list, _ := w.a.take()
	for _, q := range list {
		f(q)
	}
	w.a.done(list)
}

func (s *Stats) queue(name string) *queueStats {
	if q, ok := s.queues.Load(name); ok {
		return q.(*queueStats)
	}
	// The meters' mean rate is since the gateway started, not since the
	// queue's first event (which would make it huge at first).
	q := &queueStats{
		name:    name,
		push:    newMeter(s.start),
		pull:    newMeter(s.start),
		ret:     newWindow(s.opt.ReservoirSize, s.opt.RetentionWindow, s.now()),
		buckets: make([]uint64, len(s.opt.RetentionBuckets)+1),
	}
	actual, _ := s.queues.LoadOrStore(name, q)
	return actual.(*queueStats)
}

// touch records an event on q, after it is counted.
func (s *Stats) touch(q *queueStats) {
	q.lastUsed.Store(s.now().UnixNano())
	s.mark(q)
}

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
	s.touch(q) // after the StatsD sample: a flush must see it
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

// Tick folds the events since the last tick into the meters' rates. Run
// calls it every TickInterval. It visits only the queues that had events
// since the last tick: the others' meters apply the ticks they missed when
// they are read (meter.snapshotAt) or folded next.
func (s *Stats) Tick() {
	s.tickMu.Lock()
	defer s.tickMu.Unlock()
	list, n := s.ticks.take()
	for _, q := range list {
		if q.forgotten.Load() {
			continue
		}
		q.push.foldAt(n)
		q.pull.foldAt(n)
	}
	s.rolled.Add(uint64(len(list)))
	s.ticks.done(list)
	// Readers count the ticks since a meter's last fold from here: every
	// meter of tick n is folded by now.
	s.tickDone.Store(n)
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
		if q := v.(*queueStats); !keep[k.(string)] && q.lastUsed.Load() < cutoff {
			// Tell the watches (the console's sampler drops the queue's
			// history, as the queue is gone from Each too), before a new
			// queue of that name can be: they see this one first.
			q.forgotten.Store(true)
			s.mark(q)
			s.queues.Delete(k)
		}
		return true
	})
}

// Meters is the service that ticks the meters every TickInterval and
// prunes deleted queues every minute, from Start to Stop (a
// lifecycle.Service). names lists the existing queues.
func (s *Stats) Meters(names func() []string) lifecycle.Service {
	return lifecycle.NewLoop(func(ctx context.Context) { s.run(ctx, names) })
}

// run ticks the meters until ctx ends.
func (s *Stats) run(ctx context.Context, names func() []string) {
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
	tick := s.tickDone.Load()
	return QueueStats{
		Push:      q.push.snapshotAt(now, tick),
		Pull:      q.pull.snapshotAt(now, tick),
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

// takeStatsd returns, per queue, the events since the previous call. Only
// the queues with events since then are visited (a Watch of its own, made
// at the first call: that call visits every queue).
func (s *Stats) takeStatsd(f func(queue string, d statsdDelta)) {
	s.statsdOnce.Do(func() { s.statsdWatch = s.Watch() })
	s.statsdWatch.takeStats(func(q *queueStats) {
		if q.forgotten.Load() {
			return // as before: a pruned queue's last events are not sent
		}
		push, pull := q.push.count.Load(), q.pull.count.Load()
		q.mu.Lock()
		d := statsdDelta{pushes: push - q.statsdPushSent, pulls: pull - q.statsdPullSent, retention: q.statsd, rate: 1}
		if q.statsdSeen > len(q.statsd) {
			d.rate = float64(len(q.statsd)) / float64(q.statsdSeen)
		}
		q.statsdPushSent, q.statsdPullSent = push, pull
		q.statsd, q.statsdSeen = nil, 0
		q.mu.Unlock()
		f(q.name, d)
	})
}
