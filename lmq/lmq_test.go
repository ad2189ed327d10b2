package lmq_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/lmq"
)

func open(t testing.TB) *lmq.Queues {
	t.Helper()
	qs, err := lmq.Open(t.Context(), lmq.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := qs.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return qs
}

// TestProducerConsumer runs producers and consumers as goroutines of one
// process: every message is delivered and acked exactly once.
func TestProducerConsumer(t *testing.T) {
	qs := open(t)
	ctx := t.Context()
	const producers, consumers, each = 3, 4, 100
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				if err := qs.Push(ctx, "work", fmt.Appendf(nil, "%d-%d", p, i), nil); err != nil {
					t.Errorf("push: %v", err)
					return
				}
			}
		})
	}
	var mu sync.Mutex
	seen := map[string]int{}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	var cw sync.WaitGroup
	for range consumers {
		cw.Go(func() {
			for {
				d, err := qs.Pull(cctx, "work")
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						t.Errorf("pull: %v", err)
					}
					return
				}
				if err := d.Ack(ctx); err != nil {
					t.Errorf("ack: %v", err)
				}
				mu.Lock()
				seen[string(d.Message.Body)]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	testwait.For(t, "every message consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == producers*each
	})
	stop()
	cw.Wait()
	for body, n := range seen {
		if n != 1 {
			t.Errorf("%s delivered %d times", body, n)
		}
	}
	if n := qs.Gateway().Inspect().InFlight(); n != 0 {
		t.Errorf("%d deliveries still in flight", n)
	}
}

// rss is the process's resident set size, for the log (Linux).
func rss() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "RSS unknown"
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return "RSS " + strings.Join(strings.Fields(v), " ")
		}
	}
	return "RSS unknown"
}

// cpu is the process's user+system CPU time so far.
func cpu(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIdleConsumerCPU measures what a consumer blocked in Pull on an
// empty queue costs: the whole process's CPU (embedded NATS included) per
// second of waiting, as cpu-ms/s. It sleeps until a message arrives instead
// of polling, so the figure is a few milliseconds; a polling consumer shows
// many times that. A figure, not a pass/fail: CPU over a wall-clock period
// depends on the machine and its load. Run with
//
//	go test ./lmq/ -run '^$' -bench IdleConsumerCPU
func BenchmarkIdleConsumerCPU(b *testing.B) {
	qs := open(b)
	ctx := b.Context()
	got := make(chan *lmq.Delivery, 1)
	go func() {
		d, err := qs.Pull(ctx, "idle")
		if err != nil {
			b.Errorf("pull: %v", err)
		}
		got <- d
	}()
	testwait.For(b, "the pull to wait", func() bool { return qs.Gateway().Inspect().WaitingPulls() == 1 })
	// The start-up's work (NATS's first housekeeping) settles first: until
	// the process spends under a tenth of the CPU over 100 ms.
	last := time.Duration(-1) // the first check, at once, only reads the clock
	testwait.Paced(b, 100*time.Millisecond, testwait.Bound, "the start-up's work to settle", func() (bool, string) {
		now := cpu(b)
		used := now - last
		settled := last >= 0 && used < 10*time.Millisecond
		last = now
		return settled, fmt.Sprintf("%v CPU in 100 ms", used)
	})

	const idle = time.Second
	var used, elapsed time.Duration
	b.ResetTimer()
	for range b.N {
		before, start := cpu(b), time.Now()
		time.Sleep(idle) // the idle period measured: the time must pass, nothing is waited for
		used, elapsed = used+cpu(b)-before, elapsed+time.Since(start)
	}
	b.StopTimer()
	perSecond := time.Duration(float64(used) / elapsed.Seconds())
	b.ReportMetric(float64(perSecond)/float64(time.Millisecond), "cpu-ms/s")
	b.Logf("idle consumer: process CPU %v over %v (%v per second); %s", used, elapsed.Round(time.Millisecond), perSecond, rss())

	if err := qs.Push(ctx, "idle", []byte("wake up"), nil); err != nil {
		b.Fatal(err)
	}
	d := <-got
	if d == nil || string(d.Message.Body) != "wake up" {
		b.Fatalf("got %+v", d)
	}
	if err := d.Ack(ctx); err != nil {
		b.Fatal(err)
	}
}

// TestPullEnds: a pull ends with its context (giving back nothing it did
// not hand over) and with Close; the message pushed afterwards keeps all
// its retries.
func TestPullEnds(t *testing.T) {
	dir := t.TempDir()
	qs, err := lmq.Open(t.Context(), lmq.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for range 20 {
		// Cancelled at various moments around a push: either the pull got
		// the message, or the message is still in the queue, whole.
		pctx, cancel := context.WithCancel(ctx)
		res := make(chan *lmq.Delivery, 1)
		go func() {
			d, _ := qs.Pull(pctx, "race")
			res <- d
		}()
		if err := qs.Push(ctx, "race", []byte("m"), nil); err != nil {
			t.Fatal(err)
		}
		cancel()
		d := <-res
		if d == nil {
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			d, err = qs.Pull(pctx, "race")
			cancel()
			if err != nil {
				t.Fatalf("message lost: %v", err)
			}
		}
		if d.RetryRemaining != 2 {
			t.Fatalf("retry remaining %d, want 2 (a give-back counted as a retry)", d.RetryRemaining)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}

	errc := make(chan error, 1)
	parked := &gateway.Signals(qs.Gateway()).Dispatch.PullAnyParked
	parked.Init(t)
	go func() {
		_, err := qs.PullAny(ctx, regexp.MustCompile("^nothing"))
		errc <- err
	}()
	parked.WaitOrTimeout() // the pull waits
	if err := qs.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, lmq.ErrClosed) {
		t.Fatalf("pull at Close: %v, want ErrClosed", err)
	}
	if _, err := qs.Pull(ctx, "race"); !errors.Is(err, lmq.ErrClosed) {
		t.Fatalf("pull after Close: %v, want ErrClosed", err)
	}
	if err := qs.Push(ctx, "race", nil, nil); !errors.Is(err, lmq.ErrClosed) {
		t.Fatalf("push after Close: %v, want ErrClosed", err)
	}
	// The directory is free again: the daemon or another Open can use it.
	qs2, err := lmq.Open(ctx, lmq.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	qs2.Close()
}

// BenchmarkPushPullAck is the in-process round trip of one message.
func BenchmarkPushPullAck(b *testing.B) {
	qs, err := lmq.Open(b.Context(), lmq.Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer qs.Close()
	ctx := b.Context()
	body := make([]byte, 100)
	for b.Loop() {
		if err := qs.Push(ctx, "bench", body, nil); err != nil {
			b.Fatal(err)
		}
		d, err := qs.Pull(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Ack(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// TestServeRPC: with Options.RPC the process serves MessagePack-RPC too; a
// message pushed by an RPC client is pulled in-process, and the other way.
func TestServeRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	qs, err := lmq.Open(t.Context(), lmq.Options{DataDir: t.TempDir(), RPC: ln})
	if err != nil {
		t.Fatal(err)
	}
	defer qs.Close()
	if qs.HTTPAddr() != nil {
		t.Errorf("HTTP served without Options.HTTP: %v", qs.HTTPAddr())
	}
	conn, err := net.Dial("tcp", qs.RPCAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	enc, dec := msgpack.NewEncoder(conn), msgpack.NewDecoder(conn)
	call := func(id int, method string, params ...any) []any {
		t.Helper()
		if err := enc.Encode([]any{0, id, method, params}); err != nil {
			t.Fatal(err)
		}
		var resp []any
		if err := dec.Decode(&resp); err != nil {
			t.Fatal(err)
		}
		if len(resp) != 4 || resp[2] != nil {
			t.Fatalf("%s: %v", method, resp)
		}
		return resp
	}
	call(1, "push", "rpc", "from rpc")
	d, err := qs.Pull(t.Context(), "rpc")
	if err != nil {
		t.Fatal(err)
	}
	// RPC content is stored as the MessagePack the client sent.
	var s string
	if err := msgpack.Unmarshal(d.Message.Body, &s); err != nil || s != "from rpc" || d.Message.ContentType != "application/x-msgpack" {
		t.Fatalf("pulled %q (%s): %v", d.Message.Body, d.Message.ContentType, err)
	}
	if err := d.Ack(t.Context()); err != nil {
		t.Fatal(err)
	}

	if err := qs.Push(t.Context(), "rpc", []byte("from Go"), nil); err != nil {
		t.Fatal(err)
	}
	m, ok := call(2, "pull", "rpc", 5)[3].(map[string]any)
	if !ok || string(asBytes(m["content"])) != "from Go" {
		t.Fatalf("rpc pull: %v", m)
	}
	call(3, "done", "rpc", m["id"])
}

func asBytes(v any) []byte {
	switch b := v.(type) {
	case []byte:
		return b
	case string:
		return []byte(b)
	}
	return nil
}

// The Go API's queue control: a group's messages one at a time in push
// order, with their group and priority on the delivery; a paused queue
// hands nothing out until resumed.
func TestGroupsAndPause(t *testing.T) {
	qs := open(t)
	ctx := t.Context()
	pull := func(wait time.Duration) *lmq.Delivery {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		d, err := qs.Pull(pctx, "ctl")
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		return d
	}
	for _, b := range []string{"a1", "a2"} {
		if err := qs.Push(ctx, "ctl", []byte(b), &lmq.PushOptions{Group: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	seven := 7
	if err := qs.Push(ctx, "ctl", []byte("urgent"), &lmq.PushOptions{Priority: &seven}); err != nil {
		t.Fatal(err)
	}
	if err := qs.Push(ctx, "ctl", []byte("x"), &lmq.PushOptions{Group: "a", Priority: &seven}); !errors.Is(err, lmq.ErrInvalid) {
		t.Fatalf("a grouped push with a priority: %v, want ErrInvalid", err)
	}
	if d := pull(10 * time.Second); d == nil || string(d.Message.Body) != "urgent" || d.Priority != 7 {
		t.Fatalf("first pull: %+v; want urgent of priority 7", d)
	}
	a1 := pull(10 * time.Second)
	if a1 == nil || string(a1.Message.Body) != "a1" || a1.Group != "a" {
		t.Fatalf("second pull: %+v; want a1 of group a", a1)
	}
	if d := pull(200 * time.Millisecond); d != nil {
		t.Fatalf("a2 while a1 is in flight: %+v", d)
	}
	paused := true
	if err := qs.SetProps(ctx, "ctl", lmq.Props{Paused: &paused}); err != nil {
		t.Fatal(err)
	}
	if err := a1.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if d := pull(200 * time.Millisecond); d != nil {
		t.Fatalf("pull of a paused queue: %+v", d)
	}
	paused = false
	if err := qs.SetProps(ctx, "ctl", lmq.Props{Paused: &paused}); err != nil {
		t.Fatal(err)
	}
	if a2 := pull(10 * time.Second); a2 == nil || string(a2.Message.Body) != "a2" {
		t.Fatalf("after resume: %+v; want a2", a2)
	}
}
