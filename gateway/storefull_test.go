package gateway_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// startFullableCore is a core on an embedded server whose JetStream
// storage limit is small enough to fill in a test.
func startFullableCore(t *testing.T) *gateway.Gateway {
	t.Helper()
	ns := testnats.StartWith(t, embedded.Options{MaxStore: 4 << 20})
	nc := testnats.Connect(t, ns, "test")
	g, err := gateway.New(ctxT(t), bus.New(nc), gateway.Config{StoreHealth: ns.StoreError})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// fill pushes 64 KiB messages to queue until the store refuses one for
// want of storage, and returns how many it took.
func fill(t *testing.T, g *gateway.Gateway, queue string) int {
	t.Helper()
	body := make([]byte, 64<<10)
	for n := 0; n < 1000; n++ {
		_, err := g.Messages().Push(ctxT(t), queue, gateway.Message{ContentType: "application/octet-stream", Body: body})
		if errors.Is(err, gateway.ErrUnavailable) {
			return n
		}
		if err != nil {
			t.Fatalf("push %d: %v", n, err)
		}
	}
	t.Fatalf("1000 pushes of 64 KiB fit a store limited to 4 MiB")
	return 0
}

// TestStoreFullStillDrains: with JetStream's storage limit reached, pulls
// and acks go on, readiness holds (the store's failure is reported, not
// made unreadiness), and deleting or purging a queue frees the space: the
// deletion's registry tombstone, a write refused like any other while the
// store is full, is written once the queue's messages are gone.
func TestStoreFullStillDrains(t *testing.T) {
	t.Parallel()
	g := startFullableCore(t)
	ctx := ctxT(t)
	n := fill(t, g, "fill")
	if _, err := g.Messages().Push(ctx, "other", gateway.Message{Body: []byte("x")}); !errors.Is(err, gateway.ErrUnavailable) {
		t.Fatalf("push to a new queue with the store full: %v, want unavailable", err)
	}
	if g.StoreFailure() == nil {
		t.Error("no store failure reported with the store full")
	}
	if err := g.ProbeStore(ctx); err != nil {
		t.Errorf("readiness probe with the store full: %v, want nil (JetStream answers)", err)
	}

	// Consumers drain it: an ack removes its message, so the store is
	// topped up again after.
	d, err := g.Messages().Pull(ctx, "fill", 5*time.Second) // a bound: the first pull makes the consumer
	if err != nil || d == nil {
		t.Fatalf("pull with the store full: %v %v", d, err)
	}
	if err := g.Messages().Reply(ctx, "fill", d.ID, gateway.Ack); err != nil {
		t.Fatalf("ack with the store full: %v", err)
	}
	n += fill(t, g, "fill")

	// Deleting the full queue frees the space.
	if err := g.Queues().DeleteQueue(ctx, "fill"); err != nil {
		t.Fatalf("delete the full queue (%d messages): %v", n, err)
	}
	if ok, err := g.Queues().QueueExists(ctx, "fill"); err != nil || ok {
		t.Errorf("after the deletion the queue exists: %v %v", ok, err)
	}
	if _, err := g.Messages().Push(ctx, "other", gateway.Message{Body: []byte("x")}); err != nil {
		t.Fatalf("push after the deletion: %v", err)
	}

	// Purging a full queue frees it too.
	fill(t, g, "fill2")
	if err := g.Queues().Purge(ctx, "fill2"); err != nil {
		t.Fatalf("purge the full queue: %v", err)
	}
	if _, err := g.Messages().Push(ctx, "fill2", gateway.Message{Body: []byte("y")}); err != nil {
		t.Fatalf("push after the purge: %v", err)
	}
	if err := g.ProbeStore(ctx); err != nil {
		t.Errorf("readiness probe after the purge: %v", err)
	}
	if err := g.StoreFailure(); err != nil {
		t.Errorf("store failure after space was freed and stores succeeded: %v", err)
	}
}

// TestStoreFullDeleteSmallQueue: deleting a queue that holds little while
// another fills the store answers, whatever the store can record: the
// deletion either completes (what it could not remove for want of room is
// finished in the background) or is refused as unavailable with the queue
// still there; it never leaves a queue that both exists and answers
// otherwise.
func TestStoreFullDeleteSmallQueue(t *testing.T) {
	t.Parallel()
	g := startFullableCore(t)
	ctx := ctxT(t)
	for i := range 3 {
		if _, err := g.Messages().Push(ctx, "small", gateway.Message{Body: fmt.Appendf(nil, "m%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	fill(t, g, "fill")
	err := g.Queues().DeleteQueue(ctx, "small")
	exists, xerr := g.Queues().QueueExists(ctx, "small")
	switch {
	case xerr != nil:
		t.Fatal(xerr)
	case err == nil && exists:
		t.Errorf("deletion answered success, the queue still exists")
	case err != nil && !errors.Is(err, gateway.ErrUnavailable):
		t.Errorf("deletion with the store full: %v, want success or unavailable", err)
	case err != nil && !exists:
		t.Errorf("deletion answered %v, yet the queue is gone", err)
	}
	t.Logf("deleting a small queue with the store full: %v", err)
}
