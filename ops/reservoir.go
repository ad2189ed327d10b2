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
	Histogram         []Bin              `json:"histogram"`
	N                 int                `json:"n"`
}

// Bin is one bar of the retention histogram: Count values above the previous
// bin's upper bound and at most Bin.
type Bin struct {
	Bin   float64 `json:"bin"`
	Count int     `json:"count"`
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
		s.Histogram = []Bin{{0, 0}} // bear's histogram of nothing
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
	s.Histogram = histogram(sorted, s.StandardDeviation)
	return s
}

// histogram bins sorted values as bear's get_histogram did for LMQ: a bin
// width from the standard deviation and the count (3.5·sd/∛n, rounded, at
// least 1), round((max−min)/width)+1 upper bounds at multiples of the width
// (each rounded up to its leading two digits) offset by min, or the single
// bin max when that gives one bin or none; each value counts in the first bin
// it does not exceed. The number of bins follows the sample (a few hundred at
// most for a full reservoir), never the values' magnitude alone.
func histogram(sorted []float64, stddev float64) []Bin {
	n := len(sorted)
	lo, hi := sorted[0], sorted[n-1]
	width := math.Round(3.5 * stddev / math.Cbrt(float64(n)))
	if width == 0 {
		width = 1
	}
	count := int(math.Round((hi-lo)/width)) + 1
	var ubs []float64
	for k := 1; k <= count; k++ {
		ubs = append(ubs, roundBin(float64(k)*width))
	}
	ubs = slices.Compact(ubs) // ascending already: width > 0
	if len(ubs) <= 1 {
		ubs = []float64{hi}
	} else {
		for i := range ubs {
			ubs[i] += lo
		}
	}
	bins := make([]Bin, len(ubs))
	for i, ub := range ubs {
		bins[i].Bin = ub
	}
	for _, v := range sorted {
		if i, _ := slices.BinarySearch(ubs, v); i < len(ubs) {
			bins[i].Count++
		}
	}
	return bins
}

// roundBin is bear's round_bin: an integral upper bound rounded up to a
// multiple of 10^(round(log10(b))−1), so that bounds read as round numbers.
func roundBin(b float64) float64 {
	base := math.Trunc(math.Pow(10, math.Round(math.Log10(b)-1)))
	if base == 0 {
		base = 1
	}
	if r := math.Mod(b, base); r != 0 {
		return b + base - r
	}
	return b
}

// nearestRank is bear's percentile: the element at rank round(p·n), 1-based.
func nearestRank(sorted []float64, p float64) float64 {
	i := int(math.Round(p * float64(len(sorted))))
	i = min(max(i, 1), len(sorted))
	return sorted[i-1]
}
