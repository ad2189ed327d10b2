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
	rate  float64 // events per second
	init  bool
}

func newEWMA(window time.Duration) ewma {
	return ewma{alpha: 1 - math.Exp(-TickInterval.Seconds()/window.Seconds())}
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

// meter counts events and keeps their one, five, fifteen-minute and one-day
// moving rates. mark is lock-free (it is called on the core's hot paths); tick
// takes the meter's lock, once per TickInterval.
type meter struct {
	count     atomic.Uint64
	uncounted atomic.Uint64

	mu                      sync.Mutex
	one, five, fifteen, day ewma
	start                   time.Time
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

func (m *meter) tick() {
	instant := float64(m.uncounted.Swap(0)) / TickInterval.Seconds()
	m.mu.Lock()
	m.one.tick(instant)
	m.five.tick(instant)
	m.fifteen.tick(instant)
	m.day.tick(instant)
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

func (m *meter) snapshot(now time.Time) MeterSnapshot {
	m.mu.Lock()
	s := MeterSnapshot{
		Count:   m.count.Load(),
		One:     m.one.rate,
		Five:    m.five.rate,
		Fifteen: m.fifteen.rate,
		Day:     m.day.rate,
	}
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
