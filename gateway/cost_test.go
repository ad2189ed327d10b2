package gateway_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// BenchmarkIdlePullAnyCost measures what a pull-any waiting on many empty
// queues costs: JetStream pull requests per second (reported as req/s) and
// CPU (cpu-%, gateway and embedded NATS). One pull-any of 4s per iteration;
// run it with -benchtime 1x. LMQ_COST_QUEUES=1000 gives the figure.
// It fails if the rate exceeds 100 requests/s: the re-poll is bounded to
// about 50 a second however many queues wait.
func BenchmarkIdlePullAnyCost(b *testing.B) {
	queues := 100
	if v, err := strconv.Atoi(os.Getenv("LMQ_COST_QUEUES")); err == nil && v > 0 {
		queues = v
	}
	ctx := context.Background()
	ns, g := startCore(b)
	for i := range queues {
		if d, err := g.Messages().Pull(ctx, fmt.Sprintf("idle-%04d", i), 0); d != nil || err != nil {
			b.Fatal(d, err)
		}
	}
	spy, err := ns.Connect("spy")
	if err != nil {
		b.Fatal(err)
	}
	defer spy.Close()
	var requests atomic.Int64
	if _, err := spy.Subscribe("$JS.API.CONSUMER.MSG.NEXT.>", func(*nats.Msg) { requests.Add(1) }); err != nil {
		b.Fatal(err)
	}
	_ = spy.Flush()
	parked := &gateway.Signals(g).Dispatch.PullAnyParked
	b.ResetTimer()
	var rate, load float64
	for range b.N {
		parked.Init(b)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = g.Messages().PullAny(ctx, regexp.MustCompile(`^idle-`), 4*time.Second, nil)
		}()
		// Measured from the end of the initial look at every queue, when
		// the pull-any sleeps: what it costs while it waits.
		parked.WaitOrTimeout()
		before, cpu0 := requests.Load(), cpuSeconds()
		const window = 2 * time.Second
		time.Sleep(window) // measuring: the time must pass
		n, cpu := requests.Load()-before, cpuSeconds()-cpu0
		<-done
		rate, load = float64(n)/window.Seconds(), 100*cpu/window.Seconds()
		if rate > 100 {
			b.Fatalf("idle pull-any over %d queues issues %.0f requests/s", queues, rate)
		}
	}
	b.ReportMetric(rate, "req/s")
	b.ReportMetric(load, "cpu-%")
}

// cpuSeconds is this process's user+system CPU time.
func cpuSeconds() float64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	var f [17]string
	// Fields after the command name; the name is in parentheses.
	s := string(b)
	i := len(s) - 1
	for i > 0 && s[i] != ')' {
		i--
	}
	_, _ = fmt.Sscan(s[i+2:], &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9], &f[10], &f[11], &f[12])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}
