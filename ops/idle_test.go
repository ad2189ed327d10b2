package ops

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// A tick visits the queues that had events since the last one, not every
// queue: with many idle queues it folds none of their meters.
func TestTickSkipsIdleQueues(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	s := NewStats(StatsOptions{Now: clk.now})
	const n = 1000
	for i := range n {
		s.Pushed(fmt.Sprintf("q%d", i), 1)
	}
	s.Tick()
	if got := s.rolled.Load(); got != n {
		t.Fatalf("first tick folded %d queues, want the %d with a push", got, n)
	}
	for range 10 {
		s.Tick()
	}
	if got := s.rolled.Load(); got != n {
		t.Fatalf("ten idle ticks folded %d queues, want none", got-n)
	}
	// The idle meters were not touched: their rates are still as of the
	// first tick, and they read decayed all the same.
	v, _ := s.queues.Load("q7")
	q := v.(*queueStats)
	q.push.mu.Lock()
	folded := q.push.folded
	q.push.mu.Unlock()
	if folded != 1 {
		t.Errorf("idle meter folded at tick %d, want 1 (its only events)", folded)
	}
	ref := newMeter(s.start)
	ref.mark(1)
	for range 11 {
		ref.tick()
	}
	if got, want := s.Queue("q7").Push, ref.snapshot(clk.now()); !sameRates(got, want) {
		t.Errorf("idle queue reads %+v, want %+v (ticked every time)", got, want)
	}

	s.Pushed("q3", 1)
	s.Pulled("q5", time.Second)
	s.Tick()
	if got := s.rolled.Load() - n; got != 2 {
		t.Errorf("a tick after events on 2 queues folded %d", got)
	}
}

// The rates of a queue /stats reports are those of meters ticked every
// TickInterval, whatever the pattern of busy and idle ticks: compared
// against meters ticked every time (the original behaviour) after every tick.
func TestLazyRatesMatchTicked(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	s := NewStats(StatsOptions{Now: clk.now})
	refPush, refPull := newMeter(s.start), newMeter(s.start)
	// Busy stretches, short and long gaps (longer than the one-minute
	// window), a first pull long after the first push.
	events := func(tick int) (push, pull int) {
		switch {
		case tick < 3:
			return 7, 0
		case tick < 20:
			return 0, 0
		case tick == 20:
			return 1, 3
		case tick < 60:
			return tick % 4, tick % 3
		case tick < 400:
			return 0, 0
		case tick < 410:
			return 100, 100
		}
		return 0, 0
	}
	started := false
	for tick := range 500 {
		push, pull := events(tick)
		for range push {
			s.Pushed("q", 1)
			refPush.mark(1)
			started = true
		}
		for range pull {
			s.Pulled("q", time.Millisecond)
			refPull.mark(1)
		}
		clk.advance(TickInterval)
		s.Tick()
		if !started {
			continue // the queue is not in Stats yet; nor are its meters
		}
		refPush.tick()
		refPull.tick()
		got := s.Queue("q")
		if !sameRates(got.Push, refPush.snapshot(clk.now())) || !sameRates(got.Pull, refPull.snapshot(clk.now())) {
			t.Fatalf("tick %d: push %+v pull %+v, want push %+v pull %+v", tick,
				got.Push, got.Pull, refPush.snapshot(clk.now()), refPull.snapshot(clk.now()))
		}
	}
	if s.rolled.Load() > 60 {
		t.Errorf("folded the queue %d times in 500 ticks, want only after its ~50 busy ones", s.rolled.Load())
	}
}

func sameRates(a, b MeterSnapshot) bool {
	return a.Count == b.Count && near(a.One, b.One) && near(a.Five, b.Five) && near(a.Fifteen, b.Fifteen) &&
		near(a.Day, b.Day) && near(a.Mean, b.Mean) && near(a.Acceleration.OneToFifteen, b.Acceleration.OneToFifteen)
}

// A Watch reports the queues with events since its last Take (the first
// Take: every queue), and the pruned ones.
func TestWatch(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	s := NewStats(StatsOptions{Now: clk.now})
	for i := range 100 {
		s.Pushed(fmt.Sprintf("q%d", i), 1)
	}
	w := s.Watch()
	take := func() map[string]Activity {
		got := map[string]Activity{}
		w.Take(func(q string, a Activity) {
			if _, dup := got[q]; dup && !a.Forgotten {
				t.Errorf("%s reported twice", q)
			}
			got[q] = a
		})
		return got
	}
	if got := take(); len(got) != 100 || got["q5"].Pushes != 1 {
		t.Fatalf("first take: %d queues (q5 %+v), want all 100", len(got), got["q5"])
	}
	if got := take(); len(got) != 0 {
		t.Fatalf("take without events: %v", keys(got))
	}
	s.Pushed("q1", 1)
	s.Pulled("q2", time.Second)
	s.Replied("q3", gateway.Ack)
	s.Pushed("new", 1)
	got := take()
	if len(got) != 4 || got["q1"].Pushes != 2 || got["q2"].Pulls != 1 || got["new"].Pushes != 1 {
		t.Fatalf("take after 4 events: %+v", got)
	}

	// Pruned (deleted and idle): reported as forgotten, once; a queue of
	// that name used again starts from zero.
	clk.advance(2 * time.Minute)
	var exist []string
	for i := range 100 {
		if i != 9 {
			exist = append(exist, fmt.Sprintf("q%d", i))
		}
	}
	s.Prune(exist, time.Minute)
	got = take()
	if len(got) != 2 || !got["new"].Forgotten || !got["q9"].Forgotten {
		t.Fatalf("take after pruning new and q9: %+v", got)
	}
	s.Pushed("new", 1)
	if got := take(); got["new"].Forgotten || got["new"].Pushes != 1 {
		t.Fatalf("new again: %+v", got["new"])
	}
	// A watch with events waiting never loses them to a tick or another
	// watch.
	s.Pushed("q4", 1)
	s.Tick()
	s.takeStatsd(func(string, statsdDelta) {})
	if got := take(); got["q4"].Pushes != 2 {
		t.Fatalf("q4 after another reader: %+v", got)
	}
}

// Concurrent events and takes: the counts the takes saw add up to every
// event (none is missed between a take and the next event), and a queue with
// no event since the last take is not reported.
func TestWatchConcurrent(t *testing.T) {
	s := NewStats(StatsOptions{})
	w := s.Watch()
	queues := []string{"a", "b", "c", "d"}
	last := map[string]uint64{}
	var seen uint64
	take := func() {
		w.Take(func(q string, a Activity) {
			seen += a.Pushes - last[q]
			last[q] = a.Pushes
		})
	}
	var wg sync.WaitGroup
	const per = 2000
	for i := range 4 {
		wg.Go(func() {
			for range per {
				s.Pushed(queues[i], 1)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		take()
		s.Tick()
	}
	take()
	if seen != 4*per {
		t.Fatalf("takes saw %d pushes, want %d", seen, 4*per)
	}
	n := 0
	w.Take(func(string, Activity) { n++ })
	if n != 0 {
		t.Errorf("%d queues reported without events", n)
	}
	if got := s.Queue("a").Push.Count; got != per {
		t.Errorf("count %d", got)
	}
}

// StatsD's flush visits the queues with events since the previous flush,
// and sends what it sent before.
func TestStatsdVisitsActiveQueues(t *testing.T) {
	s := NewStats(StatsOptions{})
	for i := range 500 {
		s.Pushed(fmt.Sprintf("q%d", i), 1)
	}
	visits := func() (n int, d map[string]statsdDelta) {
		d = map[string]statsdDelta{}
		s.takeStatsd(func(q string, x statsdDelta) { n++; d[q] = x })
		return n, d
	}
	if n, d := visits(); n != 500 || d["q3"].pushes != 1 {
		t.Fatalf("first flush visited %d queues (q3 %+v)", n, d["q3"])
	}
	if n, _ := visits(); n != 0 {
		t.Fatalf("flush without events visited %d queues", n)
	}
	s.Pushed("q1", 1)
	s.Pulled("q1", 2*time.Second)
	n, d := visits()
	if n != 1 || d["q1"].pushes != 1 || d["q1"].pulls != 1 || len(d["q1"].retention) != 1 || d["q1"].retention[0] != 2 {
		t.Fatalf("flush after events on q1: %d visited, %+v", n, d["q1"])
	}
}
