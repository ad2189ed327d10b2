package gateway_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/testnats"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// TestPullAnyOverEmptyShards: a pull-any waiting over queues that are all
// empty asks JetStream for the shard list on each re-poll and, once it has
// looked at each shard, looks at no shard's subjects again while none
// changes; a message that arrives without a notification (a plain NATS
// publish) changes its shard's state and is found by the next re-poll.
func TestPullAnyOverEmptyShards(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	ns := testnats.Start(t)
	nc := testnats.Connect(t, ns, "test")
	g, err := gateway.New(ctx, nc, gateway.Config{RepollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)

	// Queues over many shards, each made by a push and emptied again.
	const n = 200
	for i := range n {
		q := fmt.Sprintf("empty/%d", i)
		if _, err := g.Push(ctx, q, gateway.Message{ContentType: "text/plain", Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		d, err := g.Pull(ctx, q, time.Second)
		if err != nil || d == nil {
			t.Fatalf("pull %s: %v %v", q, d, err)
		}
		if err := g.Reply(ctx, q, d.ID, gateway.Ack); err != nil {
			t.Fatal(err)
		}
	}

	// The shards' keepers (keeper.go) are written up to a second after the
	// last push: wait until no shard changes any more.
	js := testnats.JetStream(t, nc)
	lastSeqs := func() map[string]uint64 {
		seqs := make(map[string]uint64)
		l := js.ListStreams(ctx)
		for info := range l.Info() {
			seqs[info.Config.Name] = info.State.LastSeq
		}
		if err := l.Err(); err != nil {
			t.Fatal(err)
		}
		return seqs
	}
	for before := lastSeqs(); ; {
		time.Sleep(1500 * time.Millisecond) // longer than the keeper's pause
		now := lastSeqs()
		if maps.Equal(before, now) {
			break
		}
		before = now
	}

	spy := testnats.Connect(t, ns, "spy")
	var lists, infos atomic.Int64
	if _, err := spy.Subscribe("$JS.API.STREAM.LIST", func(*nats.Msg) { lists.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if _, err := spy.Subscribe("$JS.API.STREAM.INFO.>", func(*nats.Msg) { infos.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}

	got := make(chan *gateway.Delivery, 1)
	go func() {
		d, _ := g.PullAny(context.WithoutCancel(ctx), regexp.MustCompile(`^empty/`), 15*time.Second)
		got <- d
	}()
	// The first scan looks at every shard (each holds its keeper); it is
	// done once the second list is asked for (a scan lists, then looks).
	waitFor(t, func() bool { return lists.Load() >= 2 })
	looked := infos.Load()
	waitFor(t, func() bool { return lists.Load() >= 7 })
	if n := infos.Load() - looked; n != 0 {
		t.Errorf("%d stream info requests in 5 re-polls while no shard changed, want none (the list tells)", n)
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
