package gateway_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// TestPullAnyOverEmptyShards: a pull-any waiting over queues that are all
// empty (one message in flight) asks JetStream for the shard list on each
// re-poll and looks at the subjects of no shard but the held message's, and
// of that one once; a message that arrives without a notification (a plain
// NATS publish) changes its shard's state and is found by the next re-poll.
func TestPullAnyOverEmptyShards(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	ns, nc, g := startCoreWith(t, gateway.Config{RepollInterval: 50 * time.Millisecond})

	// Queues over many shards, each made by a push and emptied again.
	const n = 200
	for i := range n {
		q := fmt.Sprintf("empty/%d", i)
		if _, err := g.Messages().Push(ctx, q, gateway.Message{ContentType: "text/plain", Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		d, err := g.Messages().Pull(ctx, q, time.Second)
		if err != nil || d == nil {
			t.Fatalf("pull %s: %v %v", q, d, err)
		}
		if err := g.Messages().Reply(ctx, q, d.ID, gateway.Ack); err != nil {
			t.Fatal(err)
		}
	}

	// One message stays in flight: its shard holds it, unchanged, so the
	// shard is looked at once and then known from the list.
	const held = "empty/5"
	hour := 3600.0
	if err := g.Queues().UpdateProps(ctx, held, mapping.Props{Timeout: &hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Messages().Push(ctx, held, gateway.Message{ContentType: "text/plain", Body: []byte("held")}); err != nil {
		t.Fatal(err)
	}
	if d, err := g.Messages().Pull(ctx, held, time.Second); err != nil || d == nil {
		t.Fatalf("pull %s: %v %v", held, d, err)
	}

	js := testnats.JetStream(t, nc)
	spy := testnats.Connect(t, ns, "spy")
	// A channel subscription: once the spy's Flush returns, every request
	// the server routed to it before is in the channel (a handler would
	// still be counting on its own goroutine).
	infoReqs := make(chan *nats.Msg, 1<<16)
	if _, err := spy.ChanSubscribe("$JS.API.STREAM.INFO.>", infoReqs); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	infos := func() int {
		t.Helper()
		if err := spy.Flush(); err != nil {
			t.Fatal(err)
		}
		return len(infoReqs)
	}

	parked := &gateway.Signals(g).Dispatch.PullAnyParked
	parked.Init(t)
	got := make(chan *gateway.Delivery, 1)
	go func() {
		d, _ := g.Messages().PullAny(context.WithoutCancel(ctx), regexp.MustCompile(`^empty/`), 15*time.Second, nil)
		got <- d
	}()
	// The first scan looks at the held message's shard; no other shard is
	// looked at, and that one not again while it does not change. (Each
	// look ends with the pull-any asleep again; the requests of a look
	// were answered by then.)
	parked.WaitOrTimeout()
	looked := infos()
	parked.WaitN(5, "five re-polls", func(int) bool { return true })
	if n := infos(); n != looked || n > 3 {
		t.Errorf("%d stream info requests in the first scan, %d in 5 re-polls after it; want at most 3 (a lookup and two looks at one shard), then none", looked, n-looked)
	}

	// Published straight into the queue's subject: no notification, so
	// only a re-poll can find it.
	names, err := mapping.NativeNames("empty/77")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, names.Subject, []byte("quiet")); err != nil {
		t.Fatal(err)
	}
	d := <-got
	if d == nil || string(d.Message.Body) != "quiet" || d.Queue != "empty/77" {
		t.Fatalf("pull-any after a quiet publish: %+v", d)
	}
}
