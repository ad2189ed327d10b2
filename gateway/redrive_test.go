package gateway_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// TestDeadLetterQueue: with dead_letter_queue, a message whose retries are
// used up (retry 1: a delivery that times out, then one nacked) moves into
// the named queue, created on the way, as a new message there: the target's
// retry and a fresh delivery count, its content, content type, kept headers
// and push time; a large body too. An ordered group goes on with its next
// message. A queue cannot name itself.
func TestDeadLetterQueue(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	retry, timeout, dlq := 1, 0.3, "redrive-dlq"
	if err := g.Queues().UpdateProps(ctx, "redrive", mapping.Props{Retry: &retry, Timeout: &timeout, DeadLetterQueue: &dlq}); err != nil {
		t.Fatal(err)
	}
	kept := []gateway.Header{{Name: "x-trace", Value: "t-1"}}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<17) // 2 MiB: the Object Store
	for _, m := range []gateway.Message{{ContentType: "text/plain", Body: []byte("first"), Kept: kept}, {Body: big}} {
		if _, err := g.Messages().Push(ctx, "redrive", m); err != nil {
			t.Fatal(err)
		}
	}
	for _, opt := range []string{"g1", "g2"} {
		if _, err := g.Messages().PushWith(ctx, "redrive", gateway.Message{Body: []byte(opt)}, gateway.PushOptions{Group: "g"}); err != nil {
			t.Fatal(err)
		}
	}
	// First deliveries: "first" and the large one time out (not answered),
	// g1 is nacked; each comes back with its last retry and is nacked.
	var pushedAt time.Time
	for range 3 {
		d := mustPull(t, g, "redrive", time.Second)
		if string(d.Message.Body) == "first" {
			pushedAt = d.PushedAt
		}
		if string(d.Message.Body) == "g1" {
			if err := g.Messages().Reply(ctx, "redrive", d.ID, gateway.Nack); err != nil {
				t.Fatal(err)
			}
		}
	}
	// g1's end lets g2 be handed out (acked here), maybe before the others
	// time out.
	for exhausted, g2 := 0, false; exhausted < 3 || !g2; {
		d := mustPull(t, g, "redrive", 15*time.Second)
		kind := gateway.Nack
		switch {
		case string(d.Message.Body) == "g2":
			if d.RetryRemaining != 1 {
				t.Fatalf("g2 with %d retries left, want 1", d.RetryRemaining)
			}
			kind, g2 = gateway.Ack, true
		case d.RetryRemaining != 0:
			t.Fatalf("%.10q back with %d retries left, want 0", d.Message.Body, d.RetryRemaining)
		default:
			exhausted++
		}
		if err := g.Messages().Reply(ctx, "redrive", d.ID, kind); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]*gateway.Delivery{}
	for range 3 {
		d := mustPull(t, g, dlq, 15*time.Second)
		got[string(d.Message.Body[:min(len(d.Message.Body), 16)])] = d
		if d.RetryRemaining != 2 || d.Receives != 1 || d.Group != "" || d.Priority != 0 {
			t.Errorf("%.10q in the dead-letter queue: %d retries left, receive %d, group %q, priority %d; want the queue's 2, 1, none, 0",
				d.Message.Body, d.RetryRemaining, d.Receives, d.Group, d.Priority)
		}
		if err := g.Messages().Reply(ctx, dlq, d.ID, gateway.Ack); err != nil {
			t.Fatal(err)
		}
	}
	first := got["first"]
	if first == nil || first.Message.ContentType != "text/plain" || len(first.Message.Kept) != 1 || first.Message.Kept[0] != kept[0] ||
		!first.PushedAt.Equal(pushedAt) {
		t.Errorf("moved message: %+v, pushed at %v (want %v)", first, first.PushedAt, pushedAt)
	}
	if l := got["0123456789abcdef"]; l == nil || !bytes.Equal(l.Message.Body, big) {
		t.Error("large message not moved whole")
	}
	if got["g1"] == nil {
		t.Errorf("g1 not moved: %v", got)
	}
	if d, err := g.Messages().Pull(ctx, "redrive", 0); d != nil || err != nil {
		t.Fatalf("source not empty: %v %v", d, err)
	}
	if det, err := g.Inspect().QueueDetail(ctx, "redrive"); err != nil || det.DeadLetters != 0 {
		t.Fatalf("source detail %+v %v", det, err)
	}
	self := "redrive"
	if err := g.Queues().UpdateProps(ctx, "redrive", mapping.Props{DeadLetterQueue: &self}); !errors.Is(err, gateway.ErrInvalid) {
		t.Fatalf("own name as dead_letter_queue: %v, want ErrInvalid", err)
	}
}
