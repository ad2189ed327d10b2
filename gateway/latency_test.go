package gateway_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// BenchmarkLatency measures the time from a push to its delivery with 16
// long-polling consumers while pushes arrive every 500µs, and reports the
// percentiles (p50-ns … max-ns). A measurement, not a check: it belongs
// with the benchmarks (and lmq-bench), not in the test suite, where a loaded
// machine would make any bound flaky.
func BenchmarkLatency(b *testing.B) {
	g := newCoreTB(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	received := make(chan struct{}, b.N)
	for range 16 {
		wg.Go(func() {
			for ctx.Err() == nil {
				d, err := g.Messages().Pull(ctx, "lat", 200*time.Millisecond)
				if err != nil || d == nil {
					continue
				}
				ns, _ := strconv.ParseInt(string(d.Message.Body), 10, 64)
				mu.Lock()
				lat = append(lat, time.Since(time.Unix(0, ns)))
				mu.Unlock()
				_ = g.Messages().Reply(ctx, "lat", d.ID, gateway.Ack)
				select {
				case received <- struct{}{}:
				default: // a redelivery beyond b.N
				}
			}
		})
	}
	b.ResetTimer()
	tick := time.NewTicker(500 * time.Microsecond)
	var pushes sync.WaitGroup
	var pushed atomic.Int64
	for range b.N {
		<-tick.C
		pushes.Go(func() {
			body := []byte(strconv.FormatInt(time.Now().UnixNano(), 10))
			if _, err := g.Messages().Push(ctx, "lat", gateway.Message{Body: body}); err != nil {
				b.Error(err)
				return
			}
			pushed.Add(1)
		})
	}
	tick.Stop()
	pushes.Wait()
	// Bounded so that a lost message fails the benchmark instead of
	// hanging it.
	lost := time.After(time.Minute)
	for range pushed.Load() {
		select {
		case <-received:
		case <-lost:
			mu.Lock()
			n := len(lat)
			mu.Unlock()
			b.Fatalf("%d of %d pushed messages delivered after a minute", n, pushed.Load())
		}
	}
	b.StopTimer()
	cancel()
	wg.Wait()
	slices.Sort(lat)
	n := len(lat)
	b.ReportMetric(float64(lat[n/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[n*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(lat[n*999/1000].Nanoseconds()), "p999-ns")
	b.ReportMetric(float64(lat[n-1].Nanoseconds()), "max-ns")
}
