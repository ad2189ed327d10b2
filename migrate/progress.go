package migrate

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// printer writes timestamped lines; queues report from several goroutines.
type printer struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func newPrinter(w io.Writer) *printer {
	if w == nil {
		w = io.Discard
	}
	return &printer{w: w, start: time.Now()}
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "[%7.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

// progress prints, every Progress, each running queue's copied and remaining
// counts and its rate over the last interval.
func (m *migration) progress(ctx context.Context, runs []*queueRun, stop <-chan struct{}) {
	t := time.NewTicker(m.o.Progress)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		interval := now.Sub(last).Seconds()
		last = now
		// One look at LMQ's sizes for all queues, without the retries of
		// real work: progress must not hold anything up.
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		sizes, err := m.src.sizesOnce(sctx)
		cancel()
		for _, r := range runs {
			if r.started.Load() == 0 || r.ended.Load() != 0 {
				continue
			}
			copied := r.copied.Load()
			rate := float64(copied-r.lastCopied) / interval
			r.lastCopied = copied
			remaining := r.remaining.Load()
			if err == nil {
				remaining = sizes[r.name]
				r.remaining.Store(remaining)
			} else if r.waiting >= 0 {
				remaining = max(r.waiting-copied, 0)
			}
			m.p.printf("queue %q: %d copied, %s remaining, %.0f msg/s", r.name, copied, count(remaining), rate)
		}
	}
}

func (m *migration) printDone(r *queueRun) {
	q := r.report()
	rate := 0.0
	if q.Elapsed > 0 {
		rate = float64(q.Copied) / q.Elapsed.Seconds()
	}
	line := fmt.Sprintf("queue %q: %d copied (%d compound, %s) in %s, %.0f msg/s",
		q.Name, q.Copied, q.Compound, byteSize(q.Bytes), q.Elapsed.Round(time.Millisecond), rate)
	if q.Duplicates > 0 {
		line += fmt.Sprintf(", %d duplicates", q.Duplicates)
	}
	if q.Unconfirmed > 0 {
		line += fmt.Sprintf(", %d unconfirmed", q.Unconfirmed)
	}
	if q.Err != nil {
		m.p.printf("%s; NOT FINISHED: %v", line, q.Err)
		return
	}
	if q.Left > 0 {
		line += fmt.Sprintf("; %d left on the source (in flight there or in an open window): run again later", q.Left)
	}
	m.p.printf("%s; done", line)
}

// write prints the summary.
func (r *Report) write(p *printer) {
	rate := 0.0
	if r.Elapsed > 0 {
		rate = float64(r.Messages) / r.Elapsed.Seconds()
	}
	p.printf("summary: %d queues, %d messages (%d compound, %s) in %s, %.0f msg/s",
		len(r.Queues), r.Messages, r.Compound, byteSize(r.Bytes), r.Elapsed.Round(time.Millisecond), rate)
	p.printf("summary: default list %d entries (%d skipped); duplicates %d; unconfirmed %d; settled from an earlier run %d; source interruptions survived %d; left on the source %d",
		r.DefaultEntries, r.SkippedEntries, r.Duplicates, r.Unconfirmed, r.Resolved, r.SourceInterruptions, r.LeftOnSource)
	if len(r.Failed) > 0 {
		p.printf("summary: NOT FINISHED: %d queues: %v", len(r.Failed), r.Failed)
	}
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
