package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testcore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// newCore starts an embedded nats-server in a temp dir and a core on it.
func newCore(t *testing.T) *gateway.Gateway { return newCoreTB(t) }

func newCoreTB(t testing.TB) *gateway.Gateway {
	t.Helper()
	_, g := startCore(t)
	return g
}

// startCore starts an embedded nats-server and a core on it.
func startCore(t testing.TB) (*embedded.Server, *gateway.Gateway) {
	t.Helper()
	ns, _, g := startCoreConn(t)
	return ns, g
}

// startCoreConn is startCore that also returns the core's NATS connection.
func startCoreConn(t testing.TB) (*embedded.Server, *nats.Conn, *gateway.Gateway) {
	t.Helper()
	return startCoreWith(t, gateway.Config{})
}

// startCoreWith is startCoreConn with the core's configuration.
func startCoreWith(t testing.TB, cfg gateway.Config) (*embedded.Server, *nats.Conn, *gateway.Gateway) {
	t.Helper()
	ns := testnats.Start(t)
	nc := testnats.Connect(t, ns, "test")
	return ns, nc, testcore.New(t, nc, cfg)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPushPullAck(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	if st, err := g.Messages().Push(ctx, "q", gateway.Message{ContentType: "text/plain", Body: []byte("hello")}); err != nil || st != gateway.AccumNo {
		t.Fatalf("push: %v %v", st, err)
	}
	d, err := g.Messages().Pull(ctx, "q", time.Second)
	if err != nil || d == nil {
		t.Fatalf("pull: %v %v", d, err)
	}
	if string(d.Message.Body) != "hello" || d.Message.ContentType != "text/plain" || d.RetryRemaining != 2 {
		t.Fatalf("got %+v", d)
	}
	if err := g.Messages().Reply(ctx, "q", d.ID, gateway.Ack); err != nil {
		t.Fatal(err)
	}
	if err := g.Messages().Reply(ctx, "q", d.ID, gateway.Ack); err == nil {
		t.Fatal("second ack accepted")
	}
	if d, err := g.Messages().Pull(ctx, "q", 0); d != nil || err != nil {
		t.Fatalf("queue not empty after ack: %v %v", d, err)
	}
}

func mustPush(t *testing.T, g *gateway.Gateway, q, body string) {
	t.Helper()
	if _, err := g.Messages().Push(ctxT(t), q, gateway.Message{Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
}

func mustPull(t *testing.T, g *gateway.Gateway, q string, wait time.Duration) *gateway.Delivery {
	t.Helper()
	d, err := g.Messages().Pull(ctxT(t), q, wait)
	if err != nil || d == nil {
		t.Fatalf("pull %s: %v %v", q, d, err)
	}
	return d
}

// wantPulled pulls from q and checks the message's body and the retries it
// has left.
func wantPulled(t *testing.T, g *gateway.Gateway, q string, wait time.Duration, body string, retry int) *gateway.Delivery {
	t.Helper()
	d := mustPull(t, g, q, wait)
	if string(d.Message.Body) != body || d.RetryRemaining != retry {
		t.Fatalf("pull %s: got %q with %d retries left, want %q with %d", q, d.Message.Body, d.RetryRemaining, body, retry)
	}
	return d
}

func timeoutProps(t *testing.T, g *gateway.Gateway, q string, timeout float64) {
	t.Helper()
	if err := g.Queues().UpdateProps(ctxT(t), q, mapping.Props{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
}

func TestRetryCountdownAndDiscard(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	mustPush(t, g, "r", "m")
	var ids []string
	for want := 2; want >= 0; want-- {
		d := mustPull(t, g, "r", time.Second)
		if d.RetryRemaining != want {
			t.Fatalf("retry remaining %d, want %d", d.RetryRemaining, want)
		}
		for _, old := range ids {
			if old == d.ID {
				t.Fatal("delivery id reused")
			}
		}
		ids = append(ids, d.ID)
		if err := g.Messages().Reply(ctx, "r", d.ID, gateway.Nack); err != nil {
			t.Fatal(err)
		}
		if err := g.Messages().Reply(ctx, "r", d.ID, gateway.Ack); !errors.Is(err, gateway.ErrNotFound) {
			t.Fatalf("ack after nack: %v", err)
		}
	}
	if d, err := g.Messages().Pull(ctx, "r", 200*time.Millisecond); d != nil || err != nil {
		t.Fatalf("exhausted message delivered again: %+v %v", d, err)
	}
	qi, err := g.Inspect().Queue(ctx, "r")
	if err != nil || qi.Size != 0 {
		t.Fatalf("exhausted message left in stream: %+v %v", qi, err)
	}
}

func TestNackGoesBehindWaiting(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	mustPush(t, g, "n", "1")
	mustPush(t, g, "n", "2")
	d := mustPull(t, g, "n", time.Second)
	if string(d.Message.Body) != "1" {
		t.Fatalf("got %q", d.Message.Body)
	}
	if err := g.Messages().Reply(ctx, "n", d.ID, gateway.Nack); err != nil {
		t.Fatal(err)
	}
	if d := mustPull(t, g, "n", time.Second); string(d.Message.Body) != "2" {
		t.Fatalf("after nack got %q, want 2", d.Message.Body)
	}
	wantPulled(t, g, "n", time.Second, "1", 1)
}

func TestTimeoutOrderAndStaleID(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	timeoutProps(t, g, "o", 1)
	timedOut := gateway.Signals(g).TimedOut
	timedOut.Init(t)
	mustPush(t, g, "o", "a")
	da := mustPull(t, g, "o", time.Second) // a times out after 1s
	mustPush(t, g, "o", "b")               // b available before a returns
	timedOut.WaitFor("a's delivery timed out", func(d gateway.TimedOutDelivery) bool { return d.ID == da.ID })
	if n := g.Inspect().InFlight(); n != 0 {
		t.Fatalf("%d in flight once a's delivery timed out", n)
	}
	if err := g.Messages().Reply(ctx, "o", da.ID, gateway.Ack); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("ack after timeout: %v", err)
	}
	if d := mustPull(t, g, "o", 10*time.Second); string(d.Message.Body) != "b" {
		t.Fatalf("got %q, want b first", d.Message.Body)
	}
	wantPulled(t, g, "o", 10*time.Second, "a", 1)
}

func TestExtRestartsTimer(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	// Three exts 0.8s apart keep a delivery with timeout 1.5 for 2.4s;
	// each step leaves 0.7s for a loaded machine. (Timing of the timers
	// themselves would need an injectable clock in the core.)
	timeoutProps(t, g, "x", 1.5)
	mustPush(t, g, "x", "m")
	d := mustPull(t, g, "x", time.Second)
	for i := 0; i < 3; i++ {
		time.Sleep(800 * time.Millisecond) // the time must pass: ext is answered after it
		if err := g.Messages().Reply(ctx, "x", d.ID, gateway.Ext); err != nil {
			t.Fatalf("ext %d: %v", i, err)
		}
	}
	if err := g.Messages().Reply(ctx, "x", d.ID, gateway.Ack); err != nil {
		t.Fatalf("ack after exts: %v", err)
	}
}

func TestTimeoutZero(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	timeoutProps(t, g, "z", 0)
	mustPush(t, g, "z", "m")
	d1 := mustPull(t, g, "z", 0)
	d2 := mustPull(t, g, "z", 0)
	if d1.RetryRemaining != 2 || d2.RetryRemaining != 1 {
		t.Fatalf("retry %d then %d", d1.RetryRemaining, d2.RetryRemaining)
	}
	if err := g.Messages().Reply(ctx, "z", d1.ID, gateway.Ack); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("ack with timeout 0: %v", err)
	}
}

func TestLongPollWakesAndCancelLosesNothing(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	// A waiter that goes away.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	sig := gateway.Signals(g).Dispatch
	sig.WaiterParked.Init(t)
	go func() {
		defer close(done)
		_, _ = g.Messages().Pull(cctx, "w", -1)
	}()
	waitParked(sig, "w")
	cancel()
	<-done
	// A waiter that stays, woken by a push.
	got := waitingPull(t, g, "w", func() *gateway.Delivery {
		d, _ := g.Messages().Pull(ctx, "w", -1)
		return d
	})
	mustPush(t, g, "w", "m")
	if d := woken(t, got); d == nil || string(d.Message.Body) != "m" || d.RetryRemaining != 2 {
		t.Fatalf("got %+v", d)
	}
}

// waitingPull runs pull, a pull on queue ("": a pull-any), in a goroutine
// and returns once it waits: registered on the queue's dispatcher, or the
// pull-any done looking and asleep (dispatch.Signals). What it gets arrives
// on the channel.
func waitingPull(t *testing.T, g *gateway.Gateway, queue string, pull func() *gateway.Delivery) <-chan *gateway.Delivery {
	t.Helper()
	sig := gateway.Signals(g).Dispatch
	if queue == "" {
		sig.PullAnyParked.Init(t)
	} else {
		sig.WaiterParked.Init(t)
	}
	got := make(chan *gateway.Delivery, 1)
	go func() { got <- pull() }()
	if queue == "" {
		sig.PullAnyParked.WaitOrTimeout()
	} else {
		waitParked(sig, queue)
	}
	return got
}

// knowEachOther waits until a and b list each other as peers (their
// hellos, signalled as they are applied).
func knowEachOther(t *testing.T, a, b *gateway.Gateway) {
	t.Helper()
	for _, p := range [][2]*gateway.Gateway{{a, b}, {b, a}} {
		heard := gateway.Signals(p[0]).PeerHeard
		heard.Init(t)
		heard.WaitUntil("the gateways to know each other", func() bool { return slices.Contains(p[0].Peers(), p[1].ID()) })
	}
}

// waitParked waits for a pull that may wait to register on queue's
// dispatcher (sig.WaiterParked on before the pull started).
func waitParked(sig *dispatch.Signals, queue string) {
	sig.WaiterParked.WaitFor("a pull waiting on "+queue, func(p dispatch.Parked) bool {
		return p.Queue == queue && !p.NoWait
	})
}

// woken is what a waiting pull got once a push woke it.
func woken(t *testing.T, got <-chan *gateway.Delivery) *gateway.Delivery {
	t.Helper()
	select {
	case d := <-got:
		return d
	case <-time.After(20 * time.Second): // a guard against a hang, not a timing claim
		t.Fatal("waiting pull not woken")
		return nil
	}
}

func TestManyInFlight(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	const n = 1200 // above JetStream's default MaxAckPending of 1000
	for i := 0; i < n; i++ {
		mustPush(t, g, "many", "m")
	}
	for i := 0; i < n; i++ {
		if d, err := g.Messages().Pull(ctx, "many", time.Second); d == nil || err != nil {
			t.Fatalf("pull %d: %v", i, err)
		}
	}
}

func TestPullAnyFairAndExactlyOnce(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	const perQueue = 200
	queues := []string{"fa", "fb", "fc"}
	for i := 0; i < perQueue; i++ {
		for _, q := range queues {
			mustPush(t, g, q, fmt.Sprintf("%s-%d", q, i))
		}
	}
	re := regexp.MustCompile(`^f`)
	seen := make(map[string]bool)
	served := make(map[string]int)
	// The first 300 pulls must spread over all queues.
	for i := 0; i < 3*perQueue; i++ {
		d, err := g.Messages().PullAny(ctx, re, 0, nil)
		if err != nil || d == nil {
			t.Fatalf("pull-any %d: %v %v", i, d, err)
		}
		body := string(d.Message.Body)
		if seen[body] {
			t.Fatalf("%s delivered twice", body)
		}
		seen[body] = true
		if i < 3*perQueue/2 {
			served[d.Queue]++
		}
		if err := g.Messages().Reply(ctx, d.Queue, d.ID, gateway.Ack); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range queues {
		if served[q] < perQueue/4 {
			t.Fatalf("queue %s starved: %v", q, served)
		}
	}
	if d, err := g.Messages().PullAny(ctx, re, 0, nil); d != nil || err != nil {
		t.Fatalf("left over: %+v %v", d, err)
	}
}

func TestPullAnyIncludesNewQueue(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	got := waitingPull(t, g, "", func() *gateway.Delivery {
		d, _ := g.Messages().PullAny(ctx, regexp.MustCompile(`^new`), 15*time.Second, nil)
		return d
	})
	mustPush(t, g, "new-queue", "hi")
	if d := woken(t, got); d == nil || d.Queue != "new-queue" {
		t.Fatalf("got %+v", d)
	}
	if d, err := g.Messages().PullAny(ctx, regexp.MustCompile(`^nomatch`), 0, nil); d != nil || err != nil {
		t.Fatalf("no queue: %v %v", d, err)
	}
}

func TestPushAll(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	mustPush(t, g, "pa/1", "x")
	mustPush(t, g, "pa/2", "x")
	mustPush(t, g, "other", "x")
	res, err := g.Messages().PushAll(ctx, regexp.MustCompile(`^pa/`), gateway.Message{Body: []byte("all")}, nil)
	if err != nil || len(res) != 2 || res["pa/1"] != gateway.AccumNo || res["pa/2"] != gateway.AccumNo {
		t.Fatalf("push all: %v %v", res, err)
	}
	if res, err := g.Messages().PushAll(ctx, regexp.MustCompile(`^none`), gateway.Message{}, nil); err != nil || len(res) != 0 {
		t.Fatalf("no match: %v %v", res, err)
	}
}

// TestAckWaitFollowsTimeout: a queue's consumer gets the JetStream backstop
// of its own timeout, so that a gateway that dies gives
// its deliveries back soon after their timeout.
func TestAckWaitFollowsTimeout(t *testing.T) {
	t.Parallel()
	ns, g := startCore(t)
	ctx := ctxT(t)
	timeoutProps(t, g, "aw", 0.5)
	// The consumer is made on the first pull that finds a message.
	mustPush(t, g, "aw", "x")
	mustPull(t, g, "aw", 0)
	nc := testnats.Connect(t, ns, "inspect")
	js := testnats.JetStream(t, nc)
	st, err := js.Stream(ctx, mapping.StreamName("aw"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.Consumer(ctx, mapping.ConsumerName("aw"))
	if err != nil {
		t.Fatal(err)
	}
	if aw := c.CachedInfo().Config.AckWait; aw > 6*time.Second {
		t.Fatalf("AckWait %v for timeout 0.5 s", aw)
	}
	timeoutProps(t, g, "aw", 60)
	c, _ = st.Consumer(ctx, mapping.ConsumerName("aw"))
	if aw := c.CachedInfo().Config.AckWait; aw < 60*time.Second {
		t.Fatalf("AckWait %v for timeout 60 s", aw)
	}
}

// TestNewWithoutDeadline: New must not require its context to carry a deadline.
func TestNewWithoutDeadline(t *testing.T) {
	t.Parallel()
	startCore(t)
}

// TestPropsReadOwnWrites: a read right after this gateway's own write sees
// it, although the bucket's follower (which also applies the write) lags:
// an older value must not come back, neither of the default list nor of a
// queue's own properties.
func TestPropsReadOwnWrites(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	list, err := mapping.ParseDefaultList([]byte(`[[".*",{"retry":0}]]`))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if err := g.Queues().SetDefaultProps(ctx, list); err != nil {
			t.Fatal(err)
		}
		if err := g.Queues().SetDefaultProps(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if l, _ := g.Queues().DefaultProps(ctx); len(l) != 0 {
			t.Fatalf("round %d: cleared default list reads %v", i, l)
		}
		retry := i % 5
		if err := g.Queues().UpdateProps(ctx, "own", mapping.Props{Retry: &retry}); err != nil {
			t.Fatal(err)
		}
		if e, _ := g.Queues().QueueProps(ctx, "own"); e.Retry != retry {
			t.Fatalf("round %d: retry %d after writing %d", i, e.Retry, retry)
		}
		if err := g.Queues().ResetProps(ctx, "own"); err != nil {
			t.Fatal(err)
		}
		if e, _ := g.Queues().QueueProps(ctx, "own"); e.Retry != 2 {
			t.Fatalf("round %d: retry %d after a reset, want the default 2", i, e.Retry)
		}
	}
}
