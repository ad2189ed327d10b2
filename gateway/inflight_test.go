package gateway_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// TestDeliveriesAcrossGateways: two gateways each hold a delivery of one
// queue; either lists both (with who holds them and for how long still),
// and finds either by its id, whichever gateway holds it.
func TestDeliveriesAcrossGateways(t *testing.T) {
	ns := testnats.Start(t)
	newOn := func(name string) *gateway.Gateway {
		nc := testnats.Connect(t, ns, name)
		g, err := gateway.New(ctxT(t), bus.New(nc), gateway.Config{RepollInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Close)
		return g
	}
	a, b := newOn("a"), newOn("b")
	knowEachOther(t, a, b)
	ctx := ctxT(t)
	for i := 0; i < 3; i++ {
		mustPush(t, a, "held", "m")
	}
	mustPush(t, a, "other", "o")
	da, err := a.Messages().Pull(gateway.WithClient(ctx, gateway.ClientHTTP, "192.0.2.7:5000"), "held", 5*time.Second)
	if err != nil || da == nil {
		t.Fatal(da, err)
	}
	db := mustPull(t, b, "held", 5*time.Second) // no WithClient: the Go API
	mustPull(t, b, "other", 5*time.Second)

	for _, g := range []*gateway.Gateway{a, b} {
		l, err := g.Inspect().Deliveries(ctx, "held")
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Unanswered) > 0 || len(l.Truncated) > 0 {
			t.Errorf("unanswered %v, truncated %v", l.Unanswered, l.Truncated)
		}
		if len(l.Deliveries) != 2 {
			t.Fatalf("from %s: %d deliveries, want 2: %+v", g.ID(), len(l.Deliveries), l.Deliveries)
		}
		got := map[string]gateway.DeliveryInfo{}
		for _, d := range l.Deliveries {
			got[d.ID] = d
		}
		ia, ib := got[da.ID], got[db.ID]
		if ia.Gateway != a.ID() || ib.Gateway != b.ID() {
			t.Errorf("gateways %q %q, want %q %q", ia.Gateway, ib.Gateway, a.ID(), b.ID())
		}
		if ia.Client != (gateway.Client{Kind: gateway.ClientHTTP, Addr: "192.0.2.7:5000"}) || ib.Client.Kind != gateway.ClientGo {
			t.Errorf("clients %+v %+v", ia.Client, ib.Client)
		}
		for _, d := range []gateway.DeliveryInfo{ia, ib} {
			if d.Queue != "held" || d.Receives != 1 || d.RetryRemaining != da.RetryRemaining || d.Seq == 0 {
				t.Errorf("delivery %+v", d)
			}
			if left := time.Until(d.Deadline); left <= 0 || left > 31*time.Second || time.Since(d.DeliveredAt) > time.Minute {
				t.Errorf("delivered at %v, deadline %v", d.DeliveredAt, d.Deadline)
			}
		}
	}

	// Found from the gateway that does not hold it, and from the one that does.
	for _, g := range []*gateway.Gateway{a, b} {
		for _, id := range []string{da.ID, db.ID} {
			d, err := g.Inspect().FindDelivery(ctx, id)
			if err != nil || d.ID != id || d.Queue != "held" {
				t.Errorf("find %s from %s: %+v %v", id, g.ID(), d, err)
			}
		}
	}
	// Answered: gone from the list, and not found.
	if err := b.Messages().Reply(ctx, "held", da.ID, gateway.Nack); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Inspect().FindDelivery(ctx, da.ID); !errors.Is(err, gateway.ErrNotFound) {
		t.Errorf("find a nacked delivery: %v", err)
	}
	if _, err := a.Inspect().FindDelivery(ctx, "not-an-id"); !errors.Is(err, gateway.ErrNotFound) {
		t.Errorf("find a bad id: %v", err)
	}
	if _, err := a.Inspect().FindDelivery(ctx, "0badbeef-0000-4000-8000-000000000000"); !errors.Is(err, gateway.ErrNotFound) {
		t.Errorf("find an id of no gateway: %v", err)
	}
	l, err := b.Inspect().Deliveries(ctx, "held")
	if err != nil || len(l.Deliveries) != 1 || l.Deliveries[0].ID != db.ID {
		t.Errorf("after the nack: %+v %v", l, err)
	}
	if _, err := a.Inspect().Deliveries(ctx, "nosuchqueue"); !errors.Is(err, gateway.ErrNotFound) {
		t.Errorf("unknown queue: %v", err)
	}
}
