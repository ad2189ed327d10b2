package gateway_test

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestIdlePullAnyCost measures what a pull-any waiting on many empty queues
// costs: JetStream pull requests per second and CPU. It asserts only a loose
// bound on the request rate; LMQ_COST_QUEUES=1000 gives the figure.
func TestIdlePullAnyCost(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	queues := 100
	if v, err := strconv.Atoi(os.Getenv("LMQ_COST_QUEUES")); err == nil && v > 0 {
		queues = v
	}
	ns, g := startCore(t, ctxT(t))
	ctx := ctxT(t)
	for i := 0; i < queues; i++ {
		if d, err := g.Pull(ctx, fmt.Sprintf("idle-%04d", i), 0); d != nil || err != nil {
			t.Fatal(d, err)
		}
	}
	spy, err := ns.Connect("spy")
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Close()
	var requests atomic.Int64
	if _, err := spy.Subscribe("$JS.API.CONSUMER.MSG.NEXT.>", func(*nats.Msg) { requests.Add(1) }); err != nil {
		t.Fatal(err)
	}
	_ = spy.Flush()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = g.PullAny(ctx, regexp.MustCompile(`^idle-`), 4*time.Second)
	}()
	time.Sleep(time.Second) // the initial probe of every queue
	before, cpu0 := requests.Load(), cpuSeconds()
	const window = 2 * time.Second
	time.Sleep(window)
	n, cpu := requests.Load()-before, cpuSeconds()-cpu0
	<-done
	rate := float64(n) / window.Seconds()
	t.Logf("idle pull-any over %d empty queues: %.1f pull requests/s, %.1f%% CPU (gateway + embedded NATS)", queues, rate, 100*cpu/window.Seconds())
	if rate > 100 {
		t.Fatalf("idle pull-any issues %.0f requests/s", rate)
	}
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
