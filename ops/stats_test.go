package ops

import (
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// fakeClock is a settable clock for Stats.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestMeterRates(t *testing.T) {
	start := time.Unix(1000, 0)
	m := newMeter(start)
	m.mark(50) // 10/s over one tick
	m.tick()
	s := m.snapshot(start.Add(TickInterval))
	if s.Count != 50 || s.One != 10 || s.Five != 10 || s.Fifteen != 10 || s.Day != 10 {
		t.Fatalf("after the first tick: %+v, want count 50 and every rate 10", s)
	}
	if !near(s.Mean, 10) {
		t.Errorf("mean %v, want 10", s.Mean)
	}
	// An idle minute: the one-minute rate decays by e^-1, the day rate
	// hardly moves, and the one-minute rate now lags the others.
	for range 12 {
		m.tick()
	}
	s = m.snapshot(start.Add(13 * TickInterval))
	if want := 10 * math.Exp(-1); !near(s.One, want) {
		t.Errorf("one-minute rate %v after an idle minute, want %v", s.One, want)
	}
	if want := 10 * math.Exp(-1.0/5); !near(s.Five, want) {
		t.Errorf("five-minute rate %v, want %v", s.Five, want)
	}
	if s.Day < 9.9 {
		t.Errorf("day rate %v, want about 10", s.Day)
	}
	if s.Acceleration.OneToFive >= 0 || !near(s.Acceleration.OneToFive, (s.One-s.Five)/300) {
		t.Errorf("acceleration %+v for a falling rate", s.Acceleration)
	}
}

func TestSummarize(t *testing.T) {
	empty := summarize(nil)
	if empty.N != 0 || empty.Min != 0 || empty.Median != 0 || len(empty.Percentile) != 6 {
		t.Errorf("empty summary %+v", empty)
	}
	var vals []float64
	for i := 1; i <= 10; i++ {
		vals = append(vals, float64(i))
	}
	s := summarize(vals)
	checks := []struct {
		name      string
		got, want float64
	}{
		{"min", s.Min, 1}, {"max", s.Max, 10}, {"mean", s.ArithmeticMean, 5.5},
		{"median", s.Median, 5}, {"p75", s.Percentile["75"], 8}, {"p90", s.Percentile["90"], 9},
		{"p99", s.Percentile["99"], 10}, {"p999", s.Percentile["999"], 10},
		{"variance", s.Variance, 55.0 / 6}, {"skewness", s.Skewness, 0},
		{"harmonic", s.HarmonicMean, 10 / 2.9289682539682538},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if s.N != 10 {
		t.Errorf("n = %d", s.N)
	}
	if z := summarize([]float64{0, 1}); z.GeometricMean != 0 || z.HarmonicMean != 0 {
		t.Errorf("means with a zero value: %+v", z)
	}
}

func TestWindowBoundedAndSliding(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	w := newWindow(100, time.Minute, clk.now())
	for i := range 1000 {
		w.add(float64(i), clk.now())
	}
	if got := len(w.values(clk.now())); got != 100 {
		t.Fatalf("reservoir holds %d values, want 100", got)
	}
	clk.advance(time.Minute)
	w.add(5000, clk.now())
	if got := len(w.values(clk.now())); got != 101 {
		t.Errorf("after one period: %d values, want the previous 100 and the new one", got)
	}
	clk.advance(time.Minute)
	if got := w.values(clk.now()); len(got) != 1 || got[0] != 5000 {
		t.Errorf("after two periods: %v, want only the last period's value", got)
	}
	clk.advance(3 * time.Minute)
	if got := w.values(clk.now()); len(got) != 0 {
		t.Errorf("after an idle stretch: %v, want nothing", got)
	}
}

func TestStatsObserver(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	s := NewStats(StatsOptions{Now: clk.now, RetentionBuckets: []float64{0.1, 1, 10}})
	var g gateway.Observer = s
	g.Pushed("a", 10)
	g.Pushed("a", 5)
	g.Pulled("a", 50*time.Millisecond)
	g.Pulled("a", 2*time.Second)
	g.Pulled("a", -time.Second) // another gateway's clock ahead: counts as 0
	g.Replied("a", gateway.Ack)
	g.Replied("a", gateway.Nack)
	g.Replied("a", gateway.Ext)
	g.TimedOut("a")
	g.Discarded("a")
	g.Pushed("b", 1)

	got := map[string]Counters{}
	s.Each(func(q string, c Counters) { got[q] = c })
	a := got["a"]
	if a.Pushes != 2 || a.PushBytes != 15 || a.Pulls != 3 || a.Acks != 1 || a.Nacks != 1 || a.Exts != 1 || a.Timeouts != 1 || a.Discarded != 1 {
		t.Errorf("counters of a: %+v", a)
	}
	if want := []uint64{2, 2, 3}; a.RetentionCount != 3 || !equalU(a.RetentionBuckets, want) {
		t.Errorf("histogram %v (count %d), want cumulative %v", a.RetentionBuckets, a.RetentionCount, want)
	}
	if !near(a.RetentionSum, 2.05) {
		t.Errorf("retention sum %v", a.RetentionSum)
	}
	if got["b"].Pushes != 1 {
		t.Errorf("b: %+v", got["b"])
	}

	qs := s.Queue("a")
	if qs.Push.Count != 2 || qs.Pull.Count != 3 || qs.Retention.N != 3 || qs.Retention.Max != 2 || qs.Retention.Min != 0 {
		t.Errorf("queue stats %+v", qs)
	}
	if none := s.Queue("nothing"); none.Push.Count != 0 || none.Retention.Percentile == nil {
		t.Errorf("stats of an unknown queue: %+v", none)
	}

	// Prune keeps existing queues and recently used ones.
	clk.advance(2 * time.Minute)
	g.Pushed("c", 1)
	s.Prune([]string{"a"}, time.Minute)
	got = map[string]Counters{}
	s.Each(func(q string, c Counters) { got[q] = c })
	if _, ok := got["b"]; ok || len(got) != 2 {
		t.Errorf("after prune: %v, want a (exists) and c (recent)", keys(got))
	}
}

func TestStatsConcurrent(t *testing.T) {
	s := NewStats(StatsOptions{ReservoirSize: 16})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			q := []string{"x", "y"}[i%2]
			for range 500 {
				s.Pushed(q, 1)
				s.Pulled(q, time.Millisecond)
				s.Replied(q, gateway.Ack)
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			s.Tick()
			_ = s.Queue("x")
			s.Each(func(string, Counters) {})
			s.takeStatsd(func(string, statsdDelta) {})
		}
	})
	wg.Wait()
	var pushes uint64
	s.Each(func(_ string, c Counters) { pushes += c.Pushes })
	if pushes != 2000 {
		t.Errorf("pushes %d, want 2000", pushes)
	}
}

func equalU(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestRetentionHistogram: /stats' retention.histogram has LMQ's shape
// (bear's bins: an array of {"bin","count"}, [{0,0}] for no sample, one bin
// at max for a sample without spread) and its bin bounds.
func TestRetentionHistogram(t *testing.T) {
	seq := func(step float64, n int) []float64 {
		var v []float64
		for i := range n {
			v = append(v, float64(i)*step)
		}
		return v
	}
	for _, tc := range []struct {
		name string
		vals []float64
		want string
	}{
		{"empty", nil, `[{"bin":0,"count":0}]`},
		{"one value", []float64{2.5}, `[{"bin":2.5,"count":1}]`},
		{"no spread", []float64{0.25, 0.25, 0.25}, `[{"bin":0.25,"count":3}]`},
		// sd 3.03, width round(3.5·3.03/∛10) = 5, round(9/5)+1 = 3 bins
		// at 5, 10, 15, offset by min 1.
		{"1..10", append([]float64(nil), seq(1, 11)[1:]...), `[{"bin":6,"count":6},{"bin":11,"count":4},{"bin":16,"count":0}]`},
		// sd 331.7, width 522: bounds 522, 1044, 1566 rounded up to 600,
		// 1100, 1600.
		{"0..1000 by 100", seq(100, 11), `[{"bin":600,"count":7},{"bin":1100,"count":4},{"bin":1600,"count":0}]`},
	} {
		b, err := json.Marshal(summarize(tc.vals).Histogram)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%s: histogram %s, want %s", tc.name, b, tc.want)
		}
	}

	// In the /stats JSON text of a queue, next to the other statistics.
	s := NewStats(StatsOptions{})
	s.Pulled("q", 1500*time.Millisecond)
	b, err := json.Marshal(s.Queue("q"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"percentile":{"50":1.5,"75":1.5,"90":1.5,"95":1.5,"99":1.5,"999":1.5},"histogram":[{"bin":1.5,"count":1}],"n":1}`; !strings.Contains(string(b), want) {
		t.Errorf("queue stats %s\nlack %s", b, want)
	}
	b, _ = json.Marshal(s.Queue("none"))
	if !strings.Contains(string(b), `"histogram":[{"bin":0,"count":0}]`) {
		t.Errorf("queue without pulls: %s", b)
	}
}
