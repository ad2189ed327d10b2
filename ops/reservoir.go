package ops

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// window is a bounded sample of recent values: a uniform reservoir (Vitter's
// algorithm R) per period, and statistics over the current and the previous
// period. LMQ's retention statistics came from a folsom histogram; a
// lifetime-uniform reservoir would, after a long uptime, describe the past
// rather than the queue now, so this follows folsom's sliding variant: the
// numbers cover the last one to two periods. Not safe for concurrent use.
type window struct {
	size   int
	period time.Duration

	cur, prev []float64
	seen      int // values offered to cur
	curStart  time.Time
}

func newWindow(size int, period time.Duration, now time.Time) window {
	return window{size: size, period: period, curStart: now}
}

func (w *window) add(v float64, now time.Time) {
	w.rotate(now)
	w.seen++
	if len(w.cur) < w.size {
		w.cur = append(w.cur, v)
		return
	}
	if i := rand.IntN(w.seen); i < w.size {
		w.cur[i] = v
	}
}

// rotate starts a new period when the current one is over.
func (w *window) rotate(now time.Time) {
	if now.Sub(w.curStart) < w.period {
		return
	}
	if now.Sub(w.curStart) >= 2*w.period {
		// Idle for more than a period: the previous one is stale too.
		w.prev = w.prev[:0]
	} else {
		w.prev, w.cur = w.cur, w.prev
	}
	w.cur = w.cur[:0]
	w.seen = 0
	w.curStart = now
}

// values returns a sorted copy of the sample.
func (w *window) values(now time.Time) []float64 {
	w.rotate(now)
	out := make([]float64, 0, len(w.cur)+len(w.prev))
	out = append(out, w.prev...)
	out = append(out, w.cur...)
	slices.Sort(out)
	return out
}

// Summary is a histogram's statistics in LMQ's /stats shape (folsom's
// histogram values, computed as its bear library did). Every field is 0 for
// an empty sample.
type Summary struct {
	Min               float64            `json:"min"`
	Max               float64            `json:"max"`
	ArithmeticMean    float64            `json:"arithmetic_mean"`
	GeometricMean     float64            `json:"geometric_mean"`
	HarmonicMean      float64            `json:"harmonic_mean"`
	Median            float64            `json:"median"`
	Variance          float64            `json:"variance"`
	StandardDeviation float64            `json:"standard_deviation"`
	Skewness          float64            `json:"skewness"`
	Kurtosis          float64            `json:"kurtosis"`
	Percentile        map[string]float64 `json:"percentile"`
	N                 int                `json:"n"`
}

// percentiles are LMQ's, keyed as it printed them ("999" is the 99.9th).
var percentiles = [...]struct {
	key string
	p   float64
}{{"50", .50}, {"75", .75}, {"90", .90}, {"95", .95}, {"99", .99}, {"999", .999}}

// summarize computes the statistics of sorted values.
func summarize(sorted []float64) Summary {
	s := Summary{Percentile: make(map[string]float64, len(percentiles)), N: len(sorted)}
	for _, p := range percentiles {
		s.Percentile[p.key] = 0
	}
	n := len(sorted)
	if n == 0 {
		return s
	}
	s.Min, s.Max = sorted[0], sorted[n-1]
	var sum, logSum, invSum float64
	positive := true
	for _, v := range sorted {
		sum += v
		if v > 0 {
			logSum += math.Log(v)
			invSum += 1 / v
		} else {
			positive = false
		}
	}
	mean := sum / float64(n)
	s.ArithmeticMean = mean
	if positive {
		// Both are undefined (or zero) as soon as one value is zero.
		s.GeometricMean = math.Exp(logSum / float64(n))
		s.HarmonicMean = float64(n) / invSum
	}
	for _, p := range percentiles {
		s.Percentile[p.key] = nearestRank(sorted, p.p)
	}
	s.Median = s.Percentile["50"]
	if n > 1 {
		var m2, m3, m4 float64
		for _, v := range sorted {
			d := v - mean
			d2 := d * d
			m2 += d2
			m3 += d2 * d
			m4 += d2 * d2
		}
		s.Variance = m2 / float64(n-1)
		s.StandardDeviation = math.Sqrt(s.Variance)
		if pop := m2 / float64(n); pop > 0 {
			s.Skewness = (m3 / float64(n)) / math.Pow(pop, 1.5)
			s.Kurtosis = (m4/float64(n))/(pop*pop) - 3
		}
	}
	return s
}

// nearestRank is bear's percentile: the element at rank round(p·n), 1-based.
func nearestRank(sorted []float64, p float64) float64 {
	i := int(math.Round(p * float64(len(sorted))))
	i = min(max(i, 1), len(sorted))
	return sorted[i-1]
}
