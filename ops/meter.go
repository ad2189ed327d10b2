package ops

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// TickInterval is how often meters fold their new events into their rates.
// LMQ's meters (folsom) ticked every five seconds; the rates' alphas below
// assume this interval.
const TickInterval = 5 * time.Second

// ewma is an exponentially-weighted moving average of a per-second rate, as
// in folsom's (and Dropwizard's) meters.
type ewma struct {
	alpha float64
	keep  float64 // 1-alpha: what one tick without events leaves of the rate
	rate  float64 // events per second
	init  bool
}

func newEWMA(window time.Duration) ewma {
	keep := math.Exp(-TickInterval.Seconds() / window.Seconds())
	return ewma{alpha: 1 - keep, keep: keep}
}

func (e *ewma) tick(instant float64) {
	if !e.init {
		// The first interval sets the rate outright: starting from zero would
		// take a day's window a day to reach the real rate.
		e.rate, e.init = instant, true
		return
	}
	e.rate += e.alpha * (instant - e.rate)
}

// idle returns the rate after k ticks without events, computed in one step
// (k ticks of tick(0), up to rounding): a meter nobody marks is not ticked
// at all, and catches up here when it is read or marked again.
func (e *ewma) idle(k uint64) (rate float64, init bool) {
	switch {
	case k == 0:
		return e.rate, e.init
	case !e.init:
		return 0, true // the first of them sets the rate to zero outright
	}
	return e.rate * math.Pow(e.keep, float64(k)), true
}

// meter counts events and keeps their one, five, fifteen-minute and one-day
// moving rates. mark is lock-free (it is called on the core's hot paths);
// folding takes the meter's lock, at most once per TickInterval.
//
// Ticks are numbered (Stats counts them). A meter is folded only at the
// ticks after which it saw events; folded is the last tick its rates include,
// and the ticks since then, which had no events, are applied in one step
// (ewma.idle) when the meter is read or folded next. So an idle meter costs
// nothing per tick.
type meter struct {
	count     atomic.Uint64
	uncounted atomic.Uint64

	mu                      sync.Mutex
	one, five, fifteen, day ewma
	start                   time.Time
	folded                  uint64
}

func newMeter(now time.Time) *meter {
	return &meter{
		one:     newEWMA(time.Minute),
		five:    newEWMA(5 * time.Minute),
		fifteen: newEWMA(15 * time.Minute),
		day:     newEWMA(24 * time.Hour),
		start:   now,
	}
}

func (m *meter) mark(n uint64) {
	m.count.Add(n)
	m.uncounted.Add(n)
}

// tick folds the events since the last fold as the next tick.
func (m *meter) tick() {
	m.mu.Lock()
	n := m.folded + 1
	m.mu.Unlock()
	m.foldAt(n)
}

// foldAt folds the events since the last fold as tick n, after applying the
// ticks between the last fold and n as ticks without events. Folds of one
// meter must not run concurrently (Stats.Tick is serialized).
func (m *meter) foldAt(n uint64) {
	instant := float64(m.uncounted.Swap(0)) / TickInterval.Seconds()
	m.mu.Lock()
	defer m.mu.Unlock()
	if n <= m.folded {
		return
	}
	idle := n - m.folded - 1
	for _, e := range []*ewma{&m.one, &m.five, &m.fifteen, &m.day} {
		e.rate, e.init = e.idle(idle)
		e.tick(instant)
	}
	m.folded = n
}

// born sets the tick the meter's rates start after: its first fold, at n+1
// or later, is its first tick.
func (m *meter) born(n uint64) {
	m.mu.Lock()
	m.folded = n
	m.mu.Unlock()
}

// MeterSnapshot is a meter in LMQ's /stats shape (folsom's meter values).
type MeterSnapshot struct {
	Count   uint64  `json:"count"`
	One     float64 `json:"one"`
	Five    float64 `json:"five"`
	Fifteen float64 `json:"fifteen"`
	Day     float64 `json:"day"`
	// Mean is the average rate since the meter started.
	Mean         float64      `json:"mean"`
	Acceleration Acceleration `json:"acceleration"`
}

// Acceleration is folsom's change of rate between windows, per second².
type Acceleration struct {
	OneToFive     float64 `json:"one_to_five"`
	FiveToFifteen float64 `json:"five_to_fifteen"`
	OneToFifteen  float64 `json:"one_to_fifteen"`
}

// snapshot returns the meter as of its last fold.
func (m *meter) snapshot(now time.Time) MeterSnapshot { return m.snapshotAt(now, 0) }

// snapshotAt returns the meter as of tick n: the ticks after its last fold
// up to n had no events for it.
func (m *meter) snapshotAt(now time.Time, n uint64) MeterSnapshot {
	m.mu.Lock()
	var idle uint64
	if n > m.folded {
		idle = n - m.folded
	}
	s := MeterSnapshot{Count: m.count.Load()}
	s.One, _ = m.one.idle(idle)
	s.Five, _ = m.five.idle(idle)
	s.Fifteen, _ = m.fifteen.idle(idle)
	s.Day, _ = m.day.idle(idle)
	start := m.start
	m.mu.Unlock()
	if el := now.Sub(start).Seconds(); el > 0 {
		s.Mean = float64(s.Count) / el
	}
	s.Acceleration = Acceleration{
		OneToFive:     (s.One - s.Five) / 300,
		FiveToFifteen: (s.Five - s.Fifteen) / 600,
		OneToFifteen:  (s.One - s.Fifteen) / 900,
	}
	return s
}
