package console

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/ops"
)

// Rates: ops.Stats counts this gateway's pushes and pulls per queue; the
// sampler reads the counters every SampleInterval and keeps each queue's
// per-interval increments for the last HistoryLen intervals, which are the
// queue list's rates and the queue page's chart.
//
// A sample reads only the queues that had events since the previous one (an
// ops.Watch), and keeps a history only for queues with an increment in the
// last HistoryLen intervals: a queue without one reads as zeros. So idle
// queues cost the sampler nothing.

const (
	// SampleInterval is how often the counters are read.
	SampleInterval = 5 * time.Second
	// HistoryLen is the number of intervals kept per queue (six minutes).
	HistoryLen = 72
	// MaxTracked bounds the queues whose history is kept (a queue costs
	// 2*4*HistoryLen bytes, about 600): those with events in the last
	// HistoryLen intervals. Queues beyond it have no rates.
	MaxTracked = 20000
)

// history is one queue's increments, a ring indexed like sampler.pos. The
// slots of the samples after last are stale: they read as zero.
type history struct {
	push, pull         [HistoryLen]uint32
	lastPush, lastPull uint64
	last               int // the sample (sampler.ticks) that wrote the latest slot
}

// catchUp zeroes the slots of the samples after h.last up to tick, which
// had no increments for the queue.
func (h *history) catchUp(tick int) {
	for t := max(h.last+1, tick-HistoryLen+1); t <= tick; t++ {
		h.push[t%HistoryLen], h.pull[t%HistoryLen] = 0, 0
	}
	h.last = tick
}

type sampler struct {
	stats *ops.Stats
	watch *ops.Watch

	mu    sync.Mutex
	ticks int // samples taken
	pos   int // ring slot of the latest interval: ticks % HistoryLen
	at    time.Time
	q     map[string]*history
	// last holds the counters as last read of the queues without a history
	// (idle over the whole chart, or not seen since the first sample): the
	// next increment is counted from there.
	last map[string]counts
	read int // queues the latest sample read (tests)
	// long is the per-minute totals over every queue (LongLen minutes);
	// cluster the same summed over every gateway heard (this one included).
	long, cluster longRing
	// peers is each other gateway's latest sample, by id (the gateways
	// heard within PeerLapse; at most MaxPeers).
	peers map[string]peerSample
	now   func() time.Time

	// bus, when set, carries the samples between the gateways; id is this
	// gateway's.
	bus RatesBus
	id  string
}

// peerSample is another gateway's latest rate sample as heard.
type peerSample struct {
	at         time.Time
	push, pull uint64
}

type counts struct{ push, pull uint64 }

func newSampler(stats *ops.Stats) *sampler {
	s := &sampler{stats: stats, q: map[string]*history{}, last: map[string]counts{}, peers: map[string]peerSample{}, now: time.Now}
	if stats != nil {
		s.watch = stats.Watch()
	}
	return s
}

func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(SampleInterval)
	defer t.Stop()
	s.sample(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if d, ok := s.sample(now); ok {
				s.publish(d)
			}
		}
	}
}

// sample reads the counters of the queues with events since the last sample
// and records their increments; it returns their sum over every queue (not
// ok on the first sample, whose counts are from before).
func (s *sampler) sample(now time.Time) (sum counts, ok bool) {
	if s.stats == nil {
		return counts{}, false
	}
	type read struct {
		name string
		a    ops.Activity
	}
	var cur []read // in the Watch's order: a forgotten queue before its successor
	s.watch.Take(func(q string, a ops.Activity) { cur = append(cur, read{q, a}) })

	s.mu.Lock()
	defer s.mu.Unlock()
	first := s.ticks == 0
	s.ticks++
	s.pos = s.ticks % HistoryLen
	s.at = now
	s.read = len(cur)
	var sumPush, sumPull uint64
	defer func() {
		if !first {
			s.long.add(now, sumPush, sumPull)
			s.cluster.add(now, sumPush, sumPull)
			sum, ok = counts{sumPush, sumPull}, true
		}
	}()
	for _, c := range cur {
		h := s.q[c.name]
		if !first && !c.a.Forgotten {
			// The long history counts every queue, tracked or not.
			var prev counts
			if h != nil {
				prev = counts{h.lastPush, h.lastPull}
			} else if l, ok := s.last[c.name]; ok {
				prev = l
			}
			sumPush += uint64(clampDelta(c.a.Pushes, prev.push))
			sumPull += uint64(clampDelta(c.a.Pulls, prev.pull))
		}
		if c.a.Forgotten {
			// ops.Stats forgot the queue (deleted and idle).
			delete(s.q, c.name)
			delete(s.last, c.name)
			continue
		}
		if first {
			// Counts from before the console watched: not this interval's.
			s.last[c.name] = counts{c.a.Pushes, c.a.Pulls}
			continue
		}
		if h == nil {
			if len(s.q) >= MaxTracked {
				s.last[c.name] = counts{c.a.Pushes, c.a.Pulls}
				continue
			}
			h = &history{last: s.ticks - 1}
			if l, ok := s.last[c.name]; ok {
				h.lastPush, h.lastPull = l.push, l.pull
				delete(s.last, c.name)
			}
			s.q[c.name] = h
		}
		if h.last != s.ticks {
			h.catchUp(s.ticks) // zeroes this sample's slot too
		}
		h.push[s.pos] += clampDelta(c.a.Pushes, h.lastPush)
		h.pull[s.pos] += clampDelta(c.a.Pulls, h.lastPull)
		h.lastPush, h.lastPull = c.a.Pushes, c.a.Pulls
	}
	if s.ticks%HistoryLen == 0 {
		// Drop the histories that are all zeros by now; this visits the
		// queues with events in the last two HistoryLen intervals only.
		for name, h := range s.q {
			if s.ticks-h.last >= HistoryLen {
				delete(s.q, name)
				s.last[name] = counts{h.lastPush, h.lastPull}
			}
		}
	}
	return
}

func clampDelta(cur, last uint64) uint32 {
	if cur < last {
		return 0 // counters restarted
	}
	return uint32(min(cur-last, 1<<32-1))
}

// rates returns a queue's push and pull rates per second over the latest
// interval.
func (s *sampler) rates(name string) (push, pull float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.q[name]
	if h == nil || s.ticks < 2 || h.last != s.ticks {
		return 0, 0
	}
	sec := SampleInterval.Seconds()
	return float64(h.push[s.pos]) / sec, float64(h.pull[s.pos]) / sec
}

// series returns a queue's per-second rates of the last intervals, oldest
// first (at most HistoryLen, fewer when the sampler has run less long).
func (s *sampler) series(name string) (push, pull []float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(max(s.ticks-1, 0), HistoryLen)
	push, pull = make([]float64, n), make([]float64, n)
	h := s.q[name]
	if h == nil {
		return push, pull
	}
	sec := SampleInterval.Seconds()
	for i := range n {
		t := s.ticks - (n - 1 - i) // the sample of slot i
		if t > h.last {
			break // no increments since h.last: zeros
		}
		j := t % HistoryLen
		push[i], pull[i] = float64(h.push[j])/sec, float64(h.pull[j])/sec
	}
	return push, pull
}

// The long history: this gateway's pushes and pulls over all queues, summed
// per minute, for the last LongLen minutes. A fixed ring (LongLen slots of
// two counters), so it stays bounded whatever the number of queues or the
// uptime. Queues beyond MaxTracked are counted here too.

const (
	// LongStep is the width of one point of the long history.
	LongStep = time.Minute
	// LongLen is the number of points kept: two hours.
	LongLen = 120
)

// longRing is the per-minute totals, indexed by minute (Unix minutes %
// LongLen); min says which minute a slot holds, so that stale slots read as
// zero.
type longRing struct {
	push, pull [LongLen]uint64
	min        [LongLen]int64
	started    int64 // the first minute sampled (Unix minutes), 0 before
}

func (r *longRing) add(now time.Time, push, pull uint64) {
	m := now.Unix() / int64(LongStep/time.Second)
	if r.started == 0 {
		r.started = m
	}
	i := m % LongLen
	if r.min[i] != m {
		r.min[i], r.push[i], r.pull[i] = m, 0, 0
	}
	r.push[i] += push
	r.pull[i] += pull
}

// LongHistory is the answer of GET /ui/api/rates: per-minute counts,
// oldest first, the last being the minute under way.
type LongHistory struct {
	// Step is the seconds per point; Start the beginning of the first point.
	Step  float64   `json:"step"`
	Start time.Time `json:"start"`
	// Since is when the console started counting.
	Since time.Time `json:"since"`
	// Push and Pull are the messages pushed and pulled in each minute.
	Push []uint64 `json:"push"`
	Pull []uint64 `json:"pull"`
}

// longHistory returns a long history (s.long: this gateway's; s.cluster:
// the cluster's) as of now: at most LongLen points, fewer when the sampler
// has run for less long.
func (s *sampler) longHistory(r *longRing, now time.Time) LongHistory {
	s.mu.Lock()
	defer s.mu.Unlock()
	step := int64(LongStep / time.Second)
	cur := now.Unix() / step
	h := LongHistory{Step: LongStep.Seconds(), Push: []uint64{}, Pull: []uint64{}}
	if r.started == 0 {
		h.Start = time.Unix(cur*step, 0).UTC()
		return h
	}
	h.Since = time.Unix(r.started*step, 0).UTC()
	first := max(r.started, cur-LongLen+1)
	h.Start = time.Unix(first*step, 0).UTC()
	for m := first; m <= cur; m++ {
		i := m % LongLen
		var p, l uint64
		if r.min[i] == m {
			p, l = r.push[i], r.pull[i]
		}
		h.Push = append(h.Push, p)
		h.Pull = append(h.Pull, l)
	}
	return h
}

// The cluster's rates: after each sample, every gateway's console publishes
// its pushes and pulls of the interval (summed over its queues) through the
// RatesBus, and adds those it hears from the others to its cluster ring, by
// the minute it heard them in. So the cluster chart covers the time this
// console has run, like the gateway's; a sample lost (core NATS) is missing
// from it; a gateway that stops stops adding.

const (
	// PeerLapse is how long another gateway counts as live after its
	// latest sample (three intervals).
	PeerLapse = 3 * SampleInterval
	// MaxPeers bounds the other gateways whose latest sample is kept.
	MaxPeers = 1024
)

// RatesBus carries the rate samples between the gateways' consoles. The
// Core's Gateway may implement it (*gateway.Gateway does); without it the console
// shows this gateway's rates only.
type RatesBus interface {
	PublishRates(data []byte) error
	SubscribeRates(f func(data []byte)) (stop func(), err error)
}

// rateSample is the message on the bus: one gateway's increments over one
// interval of Step seconds.
type rateSample struct {
	Gateway string  `json:"g"`
	Step    float64 `json:"step"`
	Push    uint64  `json:"push"`
	Pull    uint64  `json:"pull"`
}

func (s *sampler) publish(d counts) {
	s.mu.Lock()
	bus := s.bus
	s.mu.Unlock()
	if bus == nil {
		return
	}
	b, _ := json.Marshal(rateSample{Gateway: s.id, Step: SampleInterval.Seconds(), Push: d.push, Pull: d.pull})
	_ = bus.PublishRates(b)
}

// heard adds another gateway's sample to the cluster's rates; this
// gateway's own and anything that does not decode are ignored.
func (s *sampler) heard(data []byte) {
	var m rateSample
	if json.Unmarshal(data, &m) != nil || m.Gateway == "" || m.Gateway == s.id {
		return
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.peers[m.Gateway]; !ok && len(s.peers) >= MaxPeers {
		s.prunePeers(now)
		if len(s.peers) >= MaxPeers {
			return
		}
	}
	s.peers[m.Gateway] = peerSample{at: now, push: m.Push, pull: m.Pull}
	s.cluster.add(now, m.Push, m.Pull)
}

func (s *sampler) prunePeers(now time.Time) {
	for id, p := range s.peers {
		if now.Sub(p.at) > PeerLapse {
			delete(s.peers, id)
		}
	}
}

// livePeers are the other gateways heard within PeerLapse, sorted.
func (s *sampler) livePeers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prunePeers(s.now())
	out := make([]string, 0, len(s.peers))
	for id := range s.peers {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}
