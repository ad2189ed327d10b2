package gateway_test

import (
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// TestBoundRelease: the unanswered deliveries of a Bound are available
// again at once when it is released, with their retries intact; answered
// ones are not; a delivery added after the release goes back at once.
// msgWait bounds a pull that must find a message: only reached when the
// test fails, so generous for a loaded machine.
const msgWait = 20 * time.Second

func TestBoundRelease(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	on := true
	timeout := 60.0
	if err := g.Queues().UpdateProps(ctx, "cb", mapping.Props{Timeout: &timeout, ReleaseOnDisconnect: &on}); err != nil {
		t.Fatal(err)
	}
	if !g.Messages().ReleasesOnDisconnect("cb") || g.Messages().ReleasesOnDisconnect("other") {
		t.Fatal("ReleasesOnDisconnect does not follow the property")
	}
	for _, body := range []string{"a", "b", "c"} {
		mustPush(t, g, "cb", body)
	}
	b := g.Messages().NewBound()
	var ds []*gateway.Delivery
	for range 3 {
		d := mustPull(t, g, "cb", msgWait)
		b.Add(ctx, d)
		ds = append(ds, d)
	}
	if err := g.Messages().Reply(ctx, "cb", ds[0].ID, gateway.Ack); err != nil {
		t.Fatal(err)
	}
	b.Done(ds[0].ID)
	if n := b.Release(ctx); n != 2 {
		t.Fatalf("released %d, want 2", n)
	}
	for range 2 {
		d := mustPull(t, g, "cb", 0)
		if string(d.Message.Body) == "a" {
			t.Fatal("the acked message came back")
		}
		if d.RetryRemaining != 2 {
			t.Errorf("%s: retry remaining %d after the release, want 2", d.Message.Body, d.RetryRemaining)
		}
		// Bound after the release (its connection is gone): back at once.
		b.Add(ctx, d)
	}
	for range 2 {
		if d := mustPull(t, g, "cb", 0); d.RetryRemaining != 2 {
			t.Errorf("retry remaining %d, want 2", d.RetryRemaining)
		}
	}
	if err := g.Messages().Reply(ctx, "cb", ds[1].ID, gateway.Ack); err == nil {
		t.Error("a released delivery's old id was still valid")
	}
}

// TestBoundPrunes: deliveries answered elsewhere (LMQ clients reconnect and
// ack on another connection) do not pile up in a long-lived Bound.
func TestBoundPrunes(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	b := g.Messages().NewBound()
	for range 200 {
		mustPush(t, g, "prune", "m")
		d := mustPull(t, g, "prune", msgWait)
		b.Add(ctx, d)
		if err := g.Messages().Reply(ctx, "prune", d.ID, gateway.Ack); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.Len(); n >= 64 {
		t.Fatalf("%d deliveries bound after 200 answered elsewhere", n)
	}
	if n := b.Release(ctx); n != 0 {
		t.Fatalf("released %d answered deliveries", n)
	}
}

// BenchmarkBoundAddDone is what a bound delivery costs a front end: bound
// when written to the client, unbound at its ack.
func BenchmarkBoundAddDone(b *testing.B) {
	g := newCoreTB(b)
	ctx := ctxT(b)
	timeout := 600.0
	if err := g.Queues().UpdateProps(ctx, "bench", mapping.Props{Timeout: &timeout}); err != nil {
		b.Fatal(err)
	}
	if _, err := g.Messages().Push(ctx, "bench", gateway.Message{Body: []byte("x")}); err != nil {
		b.Fatal(err)
	}
	d, err := g.Messages().Pull(ctx, "bench", time.Second)
	if err != nil || d == nil {
		b.Fatal(d, err)
	}
	bound := g.Messages().NewBound()
	b.ReportAllocs()
	for b.Loop() {
		bound.Add(ctx, d)
		bound.Done(d.ID)
	}
}

// TestDeliveryReleasesOnDisconnect: a delivery carries its queue's property.
func TestDeliveryReleasesOnDisconnect(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	on := true
	if err := g.Queues().UpdateProps(ctxT(t), "on", mapping.Props{ReleaseOnDisconnect: &on}); err != nil {
		t.Fatal(err)
	}
	mustPush(t, g, "on", "x")
	mustPush(t, g, "off", "x")
	if d := mustPull(t, g, "on", msgWait); !d.ReleasesOnDisconnect() {
		t.Error("delivery of a queue with release_on_disconnect: not bound")
	}
	if d := mustPull(t, g, "off", msgWait); d.ReleasesOnDisconnect() {
		t.Error("delivery of a queue without release_on_disconnect: bound")
	}
}
