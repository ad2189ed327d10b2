package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// maxSamplesPerWorker bounds the memory of one goroutine's latency record;
// beyond it every other sample is kept (a 5 s cell stays far below).
const maxSamplesPerWorker = 4 << 20

// recorder keeps one goroutine's latencies. Raw samples, sorted once at the
// end, give exact percentiles; at bench rates a cell holds a few MB.
type recorder struct {
	samples []time.Duration
	skip    int // keep one sample in skip+1 once the cap is reached
	seen    int
}

func (r *recorder) add(d time.Duration) {
	r.seen++
	if r.skip > 0 && r.seen%(r.skip+1) != 0 {
		return
	}
	if len(r.samples) >= maxSamplesPerWorker {
		// Halve what is kept and from now on keep every other sample.
		kept := r.samples[:0]
		for i := 0; i < len(r.samples); i += 2 {
			kept = append(kept, r.samples[i])
		}
		r.samples = kept
		r.skip = 2*r.skip + 1
	}
	r.samples = append(r.samples, d)
}

// percentiles of a merged, sorted sample set.
type percentiles struct {
	n              int
	p50, p99, p999 time.Duration
}

func merge(recs []*recorder) percentiles {
	var all []time.Duration
	for _, r := range recs {
		all = append(all, r.samples...)
	}
	return percentilesOf(all)
}

func percentilesOf(all []time.Duration) percentiles {
	if len(all) == 0 {
		return percentiles{}
	}
	slices.Sort(all)
	at := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(len(all)))) - 1
		return all[max(0, min(i, len(all)-1))]
	}
	return percentiles{n: len(all), p50: at(0.50), p99: at(0.99), p999: at(0.999)}
}

// fmtDur prints a latency with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

// fmtRate prints msgs/s with a thousands separator.
func fmtRate(r float64) string {
	if r <= 0 || math.IsNaN(r) {
		return "0"
	}
	return fmtInt(int64(math.Round(r)))
}

func fmtInt(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var out []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	return string(out)
}

func fmtSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d B", n)
	}
}

func fmtRatio(num, den float64) string {
	if num <= 0 || den <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", num/den)
}
