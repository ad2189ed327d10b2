package gateway_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// TestPurge: a purge removes waiting messages of every kind (priorities,
// delays) and the deliveries in flight, keeps the queue's properties and
// dead letters; an in-flight delivery can still be acked, and a nacked or
// timed-out one does not come back.
func TestPurge(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	const q = "purge"
	retry, yes, timeout := 1, true, 30.0
	if err := g.Queues().UpdateProps(ctx, q, mapping.Props{Retry: &retry, DeadLetter: &yes, Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	// One dead letter: two deliveries, both nacked.
	mustPush(t, g, q, "dead")
	for range 2 {
		d := mustPull(t, g, q, time.Second)
		if err := g.Messages().Reply(ctx, q, d.ID, gateway.Nack); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, "a dead letter", func() bool {
		det, err := g.Inspect().QueueDetail(ctx, q)
		return err == nil && det.DeadLetters == 1
	})
	// Three deliveries in flight: to ack, to nack, to let time out.
	for _, b := range []string{"ack", "nack", "timeout"} {
		mustPush(t, g, q, b)
	}
	toAck, toNack := mustPull(t, g, q, time.Second), mustPull(t, g, q, time.Second)
	short := 0.2
	if err := g.Queues().UpdateProps(ctx, q, mapping.Props{Timeout: &short}); err != nil {
		t.Fatal(err)
	}
	mustPull(t, g, q, time.Second) // times out after the purge (or before: it then comes back and is purged)
	if err := g.Queues().UpdateProps(ctx, q, mapping.Props{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	// Waiting: plain, prioritized, delayed.
	mustPush(t, g, q, "waiting")
	p := 5
	if _, err := g.Messages().PushWith(ctx, q, gateway.Message{Body: []byte("prio")}, gateway.PushOptions{Priority: &p}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Messages().PushWith(ctx, q, gateway.Message{Body: []byte("delayed")}, gateway.PushOptions{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}

	if err := g.Queues().Purge(ctx, q); err != nil {
		t.Fatal(err)
	}
	det, err := g.Inspect().QueueDetail(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if det.Size != 0 || det.Delayed != 0 || det.InFlight != 0 || det.DeadLetters != 1 {
		t.Fatalf("after purge: %+v", det)
	}
	if det.Props.Retry != 1 || !det.Props.DeadLetter || det.Props.Timeout != timeout {
		t.Fatalf("properties changed: %+v", det.Props)
	}
	if err := g.Messages().Reply(ctx, q, toAck.ID, gateway.Ack); err != nil {
		t.Fatalf("ack of a purged delivery: %v", err)
	}
	if err := g.Messages().Reply(ctx, q, toNack.ID, gateway.Nack); err != nil {
		t.Fatalf("nack of a purged delivery: %v", err)
	}
	testwait.For(t, "no delivery in flight", func() bool { return g.Inspect().InFlightByQueue()[q] == 0 })
	if d, err := g.Messages().Pull(ctx, q, 0); d != nil || err != nil {
		t.Fatalf("purged message delivered again: %+v %v", d, err)
	}
	if det, err := g.Inspect().QueueDetail(ctx, q); err != nil || det.Size != 0 || det.DeadLetters != 1 {
		t.Fatalf("after the replies: %+v %v", det, err)
	}
	// The queue works after.
	mustPush(t, g, q, "after")
	d := wantPulled(t, g, q, time.Second, "after", 1)
	if err := g.Messages().Reply(ctx, q, d.ID, gateway.Ack); err != nil {
		t.Fatal(err)
	}

	if err := g.Queues().Purge(ctx, "no such queue"); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("purge of an unknown queue: %v, want ErrNotFound", err)
	}
	if err := g.Queues().Purge(ctx, ""); !errors.Is(err, gateway.ErrInvalid) {
		t.Fatalf("purge of an invalid name: %v, want ErrInvalid", err)
	}
}
