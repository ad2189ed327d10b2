package gateway

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

func setProps(t *testing.T, g *Gateway, queue, js string) {
	t.Helper()
	p, err := mapping.ParseProps([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Queues().UpdateProps(prioCtx(t), queue, p); err != nil {
		t.Fatal(err)
	}
}

// A paused queue stores pushes and hands nothing out (a no-wait pull answers
// empty, a waiting pull keeps waiting, on this and another gateway); resuming
// through the other gateway wakes the waiting pulls.
func TestPauseHoldsPullsAndResumeWakesThem(t *testing.T) {
	ns := testnats.Start(t)
	a, b := gatewayOn(t, ns, "a"), gatewayOn(t, ns, "b")
	ctx := prioCtx(t)
	b.props.TestApplied().Init(t)
	setProps(t, a, "pq", `{"paused":true}`)
	pushP(t, a, "pq", "m1", -1)
	pushP(t, a, "pq", "m2", -1)
	if d, err := a.Messages().Pull(ctx, "pq", 0); err != nil || d != nil {
		t.Fatalf("no-wait pull of a paused queue = %v, %v; want nothing", d, err)
	}
	// The other gateway sees the pause too (followed from the bucket).
	b.props.TestApplied().WaitUntil("b sees the pause", func() bool { return b.props.Effective("pq").Paused })
	got := make(chan string, 2)
	for _, g := range []*Gateway{a, b} {
		g.disp.TestSignals.WaiterParked.Init(t)
		go func() {
			d, err := g.Messages().Pull(ctx, "pq", 30*time.Second)
			if err != nil || d == nil {
				got <- "none"
				return
			}
			got <- string(d.Message.Body)
		}()
	}
	for _, g := range []*Gateway{a, b} {
		waitParkedOn(g, "pq")
	}
	select {
	case m := <-got:
		t.Fatalf("a pull of a paused queue got %q", m)
	default:
	}
	setProps(t, b, "pq", `{"paused":false}`)
	seen := map[string]bool{<-got: true, <-got: true}
	if !seen["m1"] || !seen["m2"] {
		t.Fatalf("after resume the waiting pulls got %v, want m1 and m2", seen)
	}
	if own, _ := a.Queues().OwnProps(ctx, "pq"); own.Paused == nil || *own.Paused {
		t.Fatalf("own props after resume = %s", own.JSON())
	}
}

// max_inflight=2: with two deliveries held, through either gateway, a pull
// finds nothing though messages wait, until one is acked; five clients
// over two gateways never hold more than two deliveries at once, and every
// message is handed out.
func TestMaxInflightAcrossGateways(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	a, b := gatewayOn(t, ns, "a"), gatewayOn(t, ns, "b")
	ctx := prioCtx(t)

	// The limit by hand (the clients below hold each delivery only as long
	// as the scheduler lets them, so how close they come to it is luck).
	setProps(t, a, "lim1", `{"max_inflight":2,"timeout":60}`)
	for range 4 {
		pushP(t, a, "lim1", "m", -1)
	}
	d1, d2 := pullP(t, a, "lim1"), pullP(t, b, "lim1")
	for _, g := range []*Gateway{a, b} {
		if d, err := g.Messages().Pull(ctx, "lim1", 0); d != nil || err != nil {
			t.Fatalf("a third delivery with max_inflight 2: %v (%v)", d, err)
		}
	}
	if err := a.Messages().Reply(ctx, "lim1", d1.ID, Ack); err != nil {
		t.Fatal(err)
	}
	d3 := pullP(t, b, "lim1") // a slot is free again
	for _, d := range []*Delivery{d2, d3} {
		if err := b.Messages().Reply(ctx, "lim1", d.ID, Ack); err != nil {
			t.Fatal(err)
		}
	}

	setProps(t, a, "lim", `{"max_inflight":2}`)
	const n = 30
	for i := 0; i < n; i++ {
		pushP(t, a, "lim", "m", -1)
	}
	var inflight, peak, done atomic.Int32
	var wg sync.WaitGroup
	for c := 0; c < 5; c++ {
		g := a
		if c%2 == 1 {
			g = b
		}
		wg.Go(func() {
			for done.Load() < n {
				d, err := g.Messages().Pull(ctx, "lim", 2*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				if d == nil {
					continue
				}
				v := inflight.Add(1)
				for {
					p := peak.Load()
					if v <= p || peak.CompareAndSwap(p, v) {
						break
					}
				}
				// Held a few turns of the scheduler, so that the other
				// clients pull meanwhile.
				for range 4 {
					runtime.Gosched()
				}
				inflight.Add(-1)
				if err := g.Messages().Reply(context.Background(), "lim", d.ID, Ack); err != nil {
					t.Error(err)
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > 2 {
		t.Fatalf("peak deliveries in flight = %d, want at most 2", p)
	}
	if done.Load() != n {
		t.Fatalf("acked %d of %d", done.Load(), n)
	}
}
