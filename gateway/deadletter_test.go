package gateway_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

func TestDelay(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	start := time.Now()
	if _, err := g.Messages().PushWith(ctx, "dl", gateway.Message{Body: []byte("later")}, gateway.PushOptions{Delay: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	// The delay is long enough for the requests up to the detail to come
	// before its end even on a slow machine.
	mustPush(t, g, "dl", "now")
	if d := mustPull(t, g, "dl", 0); string(d.Message.Body) != "now" {
		t.Fatalf("got %q", d.Message.Body)
	}
	if d, _ := g.Messages().Pull(ctx, "dl", 500*time.Millisecond); d != nil {
		t.Fatalf("delayed message visible early: %q after %v", d.Message.Body, time.Since(start))
	}
	det, err := g.Inspect().QueueDetail(ctx, "dl")
	if err != nil || det.Delayed != 1 {
		t.Fatalf("detail %+v %v", det, err)
	}
	d := mustPull(t, g, "dl", 15*time.Second)
	if string(d.Message.Body) != "later" || time.Since(start) < 3*time.Second || d.RetryRemaining != 2 {
		t.Fatalf("got %q retry %d after %v", d.Message.Body, d.RetryRemaining, time.Since(start))
	}
}

func TestTTL(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	if _, err := g.Messages().PushWith(ctx, "ttl", gateway.Message{Body: []byte("short")}, gateway.PushOptions{TTL: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	mustPush(t, g, "ttl", "keeps")
	testwait.For(t, "queueSize(ctx, g, \"ttl\") == 1", func() bool { return queueSize(ctx, g, "ttl") == 1 }) // "short" expired
	if d := mustPull(t, g, "ttl", time.Second); string(d.Message.Body) != "keeps" {
		t.Fatalf("expired message delivered: %q", d.Message.Body)
	}
	// The queue property applies to every push.
	ttl := 0.3
	if err := g.Queues().UpdateProps(ctx, "ttl2", mapping.Props{TTL: &ttl}); err != nil {
		t.Fatal(err)
	}
	mustPush(t, g, "ttl2", "x")
	testwait.For(t, "queueSize(ctx, g, \"ttl2\") == 0", func() bool { return queueSize(ctx, g, "ttl2") == 0 })
	if d, _ := g.Messages().Pull(ctx, "ttl2", 0); d != nil {
		t.Fatal("expired message delivered (property)")
	}
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	retry, yes := 0, true
	if err := g.Queues().UpdateProps(ctx, "dead", mapping.Props{Retry: &retry, DeadLetter: &yes}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		mustPush(t, g, "dead", fmt.Sprint(i))
	}
	for i := 0; i < 3; i++ {
		d := mustPull(t, g, "dead", time.Second)
		if err := g.Messages().Reply(ctx, "dead", d.ID, gateway.Nack); err != nil {
			t.Fatal(err)
		}
	}
	if d, _ := g.Messages().Pull(ctx, "dead", 0); d != nil {
		t.Fatal("exhausted message delivered")
	}
	var det gateway.QueueDetail
	testwait.For(t, "3 dead letters", func() bool {
		det, _ = g.Inspect().QueueDetail(ctx, "dead")
		return det.DeadLetters == 3
	})
	if det.DeadLetters != 3 || det.Size != 0 {
		t.Fatalf("detail %+v", det)
	}
	head, err := g.Inspect().DeadLetterHead(ctx, "dead")
	if err != nil || head == nil || string(head.Message.Body) != "0" || head.Deliveries != 1 || head.DiedAt.IsZero() {
		t.Fatalf("head %+v %v", head, err)
	}
	if n, err := g.Inspect().RespawnDeadLetters(ctx, "dead", 2); n != 2 || err != nil {
		t.Fatalf("respawn %d %v", n, err)
	}
	d := mustPull(t, g, "dead", time.Second)
	if string(d.Message.Body) != "0" || d.RetryRemaining != 0 {
		t.Fatalf("respawned %q retry %d", d.Message.Body, d.RetryRemaining)
	}
	if n, err := g.Inspect().DeleteDeadLetters(ctx, "dead"); n != 1 || err != nil {
		t.Fatalf("delete %d %v", n, err)
	}
	if head, err := g.Inspect().DeadLetterHead(ctx, "dead"); head != nil || err != nil {
		t.Fatalf("after delete %+v %v", head, err)
	}
}

func TestBatch(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	msgs := []gateway.Message{{Body: []byte("a"), ContentType: "text/plain"}, {Body: []byte("b")}, {Body: []byte("c")}}
	if err := g.Messages().PushBatch(ctx, "batch", msgs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a", "b", "c"} {
		if d := mustPull(t, g, "batch", time.Second); string(d.Message.Body) != want {
			t.Fatalf("got %q want %q", d.Message.Body, want)
		}
	}
	// A batch message that is nacked comes back (its copy is no batch).
	if err := g.Messages().PushBatch(ctx, "batch", msgs[:2]); err != nil {
		t.Fatal(err)
	}
	d := mustPull(t, g, "batch", time.Second)
	if err := g.Messages().Reply(ctx, "batch", d.ID, gateway.Nack); err != nil {
		t.Fatal(err)
	}
	if d := mustPull(t, g, "batch", time.Second); string(d.Message.Body) != "b" {
		t.Fatalf("got %q", d.Message.Body)
	}
	if d := mustPull(t, g, "batch", time.Second); string(d.Message.Body) != "a" || d.RetryRemaining != 1 {
		t.Fatalf("nacked batch message: %q retry %d", d.Message.Body, d.RetryRemaining)
	}
	if err := g.Messages().PushBatch(ctx, "batch", make([]gateway.Message, gateway.MaxBatch+1)); err == nil {
		t.Fatal("oversized batch accepted")
	}
}

// queueSize is the queue's size (waiting and in flight), or -1 when it
// cannot be read.
func queueSize(ctx context.Context, g *gateway.Gateway, q string) int {
	d, err := g.Inspect().QueueDetail(ctx, q)
	if err != nil {
		return -1
	}
	return int(d.Size)
}
