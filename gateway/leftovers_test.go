package gateway

import (
	"context"
	"errors"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/gateway/leftover"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// TestLeftoversRemovedOnceThereIsRoom: what a queue deleted while the store
// was full could not remove (its properties: a tombstone refused for want
// of room) stays while the store is full and is removed by the gateway's
// worker once space is freed.
func TestLeftoversRemovedOnceThereIsRoom(t *testing.T) {
	t.Parallel()
	ns := testnats.StartWith(t, embedded.Options{MaxStore: 4 << 20})
	g, err := New(context.Background(), bus.New(testnats.Connect(t, ns, "test")), Config{StoreHealth: ns.StoreError})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	ctx := prioCtx(t)
	setProps(t, g, "gone", `{"timeout":7}`)
	// The queue's key goes, its properties stay: a deletion whose property
	// tombstone the full store refused.
	if err := g.reg.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 64<<10)
	for n := 0; ; n++ {
		if n == 1000 {
			t.Fatal("1000 pushes of 64 KiB fit a store limited to 4 MiB")
		}
		if _, err := g.Messages().Push(ctx, "fill", Message{Body: body}); errors.Is(err, ErrUnavailable) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if err := g.dropOwnProps(ctx, "gone"); err == nil {
		t.Fatal("the property tombstone fits the full store: nothing to test")
	}
	g.left.Add("gone", leftover.Props)
	if g.props.Own("gone").Timeout == nil {
		t.Fatal("the properties went while the store was full")
	}

	if err := g.Queues().DeleteQueue(ctx, "fill"); err != nil {
		t.Fatalf("delete the full queue: %v", err)
	}
	testwait.For(t, "the deleted queue's properties removed", func() bool {
		return g.props.Own("gone").Timeout == nil && g.left.Count() == 0
	})
	// The worker stops once nothing is left.
	testwait.For(t, "the leftover worker to stop", func() bool {
		return !g.left.Running()
	})
}
