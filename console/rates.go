package console

import (
	"context"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/ops"
)

// Rates: ops.Stats counts this gateway's pushes and pulls per queue; the
// sampler reads the counters every SampleInterval and keeps each queue's
// per-interval increments for the last HistoryLen intervals, which are the
// queue list's rates and the queue page's chart.

const (
	// SampleInterval is how often the counters are read.
	SampleInterval = 5 * time.Second
	// HistoryLen is the number of intervals kept per queue (six minutes).
	HistoryLen = 72
	// MaxTracked bounds the queues whose history is kept (a queue costs
	// 2*4*HistoryLen bytes, about 600). Queues beyond it have no rates.
	MaxTracked = 20000
)

// history is one queue's increments, a ring indexed like sampler.pos.
type history struct {
	push, pull         [HistoryLen]uint32
	lastPush, lastPull uint64
	seen               int // the sampler's tick count when last in the counters
}

type sampler struct {
	stats *ops.Stats

	mu    sync.Mutex
	ticks int // samples taken
	pos   int // ring slot of the latest interval
	at    time.Time
	q     map[string]*history
}

func newSampler(stats *ops.Stats) *sampler {
	return &sampler{stats: stats, q: map[string]*history{}}
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
			s.sample(now)
		}
	}
}

// sample reads the counters and records their increments since the last
// sample.
func (s *sampler) sample(now time.Time) {
	if s.stats == nil {
		return
	}
	type counts struct{ push, pull uint64 }
	cur := map[string]counts{}
	s.stats.Each(func(q string, c ops.Counters) { cur[q] = counts{c.Pushes, c.Pulls} })

	s.mu.Lock()
	defer s.mu.Unlock()
	first := s.ticks == 0
	s.ticks++
	s.pos = (s.pos + 1) % HistoryLen
	s.at = now
	for name, c := range cur {
		h := s.q[name]
		if h == nil {
			if len(s.q) >= MaxTracked {
				continue
			}
			h = &history{}
			if first {
				// Counts from before the console watched: not this interval's.
				h.lastPush, h.lastPull = c.push, c.pull
			}
			s.q[name] = h
		}
		h.push[s.pos] = clampDelta(c.push, h.lastPush)
		h.pull[s.pos] = clampDelta(c.pull, h.lastPull)
		h.lastPush, h.lastPull = c.push, c.pull
		h.seen = s.ticks
	}
	for name, h := range s.q {
		if h.seen != s.ticks {
			// ops.Stats forgot the queue (deleted and idle).
			delete(s.q, name)
		}
	}
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
	if h == nil || s.ticks < 2 {
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
		j := (s.pos - (n - 1 - i) + HistoryLen) % HistoryLen
		push[i], pull[i] = float64(h.push[j])/sec, float64(h.pull[j])/sec
	}
	return push, pull
}
