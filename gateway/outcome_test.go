package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// A retried ack of a delivery this gateway acked is still LMQ's "not found",
// and says that the ack took effect.
func TestRetriedAckReadsAsDone(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	mustPush(t, g, "q", "a")
	d := mustPull(t, g, "q", time.Second)
	if err := g.Messages().Reply(ctx, "q", d.ID, gateway.Ack); err != nil {
		t.Fatal(err)
	}
	err := g.Messages().Reply(ctx, "q", d.ID, gateway.Ack)
	if !errors.Is(err, gateway.ErrNotFound) || !errors.Is(err, gateway.ErrAlreadyAcked) {
		t.Fatalf("second ack: %v, want not found / already acknowledged", err)
	}
	// A nack of an acked delivery gets the same answer: nothing to undo.
	if err := g.Messages().Reply(ctx, "q", d.ID, gateway.Nack); !errors.Is(err, gateway.ErrAlreadyAcked) {
		t.Fatalf("nack after ack: %v", err)
	}
	// A delivery that timed out is only "not found".
	timeoutProps(t, g, "r", 0.05)
	mustPush(t, g, "r", "b")
	d2 := mustPull(t, g, "r", time.Second)
	// It comes back once its timeout passed.
	if d3 := mustPull(t, g, "r", 10*time.Second); d3.ID == d2.ID {
		t.Fatal("redelivery kept the id")
	}
	if err := g.Messages().Reply(ctx, "r", d2.ID, gateway.Ack); !errors.Is(err, gateway.ErrNotFound) || errors.Is(err, gateway.ErrAlreadyAcked) {
		t.Fatalf("ack after timeout: %v, want plain not found", err)
	}
}

// A push with an idempotency key stored twice within the window is one
// message.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	opts := gateway.PushOptions{IdempotencyKey: "order-17"}
	for range 3 {
		if _, err := g.Messages().PushWith(ctx, "q", gateway.Message{Body: []byte("x")}, opts); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.Messages().PushWith(ctx, "q", gateway.Message{Body: []byte("y")}, gateway.PushOptions{IdempotencyKey: "order-18"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		d, err := g.Messages().Pull(ctx, "q", 0)
		if err != nil {
			t.Fatal(err)
		}
		if d == nil {
			break
		}
		got = append(got, string(d.Message.Body))
		if err := g.Messages().Reply(ctx, "q", d.ID, gateway.Ack); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || got[0] != "x" || got[1] != "y" {
		t.Fatalf("stored %q, want [x y]", got)
	}
	// A key is per queue, also for two queues sharing a shard stream.
	other := ""
	for i := 0; other == ""; i++ {
		if n := fmt.Sprintf("other-%d", i); mapping.Shard(n) == mapping.Shard("q") {
			other = n
		}
	}
	if _, err := g.Messages().PushWith(ctx, other, gateway.Message{Body: []byte("o")}, opts); err != nil {
		t.Fatal(err)
	}
	if d := mustPull(t, g, other, 0); string(d.Message.Body) != "o" {
		t.Fatalf("%s: pulled %q, want the message pushed with a key another queue used", other, d.Message.Body)
	}
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'k'
	}
	if _, err := g.Messages().PushWith(ctx, "q", gateway.Message{Body: []byte("z")}, gateway.PushOptions{IdempotencyKey: string(long)}); !errors.Is(err, gateway.ErrInvalid) {
		t.Fatalf("300-byte key: %v, want invalid", err)
	}
}

// With NATS gone, an ack and a push still get an answer: unknown or
// unavailable, never a hang. (No upper time bound is asserted; a hang is
// caught by the test's own deadline.)
func TestAnswersWithNATSGone(t *testing.T) {
	t.Parallel()
	ns, g := startCore(t)
	ctx := ctxT(t)
	mustPush(t, g, "q", "a")
	d := mustPull(t, g, "q", time.Second)
	ns.Stop()

	err := g.Messages().Reply(context.Background(), "q", d.ID, gateway.Ack)
	if !errors.Is(err, gateway.ErrUnknown) && !errors.Is(err, gateway.ErrUnavailable) {
		t.Fatalf("ack with NATS gone: %v, want unknown or unavailable", err)
	}
	_, err = g.Messages().Push(ctx, "q", gateway.Message{Body: []byte("b")})
	if !errors.Is(err, gateway.ErrUnknown) && !errors.Is(err, gateway.ErrUnavailable) {
		t.Fatalf("push with NATS gone: %v, want unknown or unavailable", err)
	}
}

// Push-all and pull-any never bring back a queue that another gateway
// deleted after this one listed it.
func TestRegexpOpsNeverRecreate(t *testing.T) {
	t.Parallel()
	ns, a := startCore(t)
	ctx := ctxT(t)
	nc := testnats.Connect(t, ns, "gateway b")
	b, err := gateway.New(ctx, bus.New(nc), gateway.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	js := testnats.JetStream(t, nc)
	reg, err := js.KeyValue(ctx, mapping.QueuesBucket)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^gone/`)
	learned := gateway.Signals(b).QueuesApplied
	for round := range 20 {
		name := fmt.Sprintf("gone/%d", round)
		learned.Init(t)
		mustPush(t, a, name, "x")
		// b learns of the queue from the registry.
		learned.WaitUntil("b to learn of "+name, func() bool { return slices.Contains(b.Queues().QueueNames(), name) })
		if err := b.Queues().DeleteQueue(ctx, name); err != nil {
			t.Fatal(err)
		}
		// a may not have heard of the deletion yet: exactly the race.
		if _, err := a.Messages().PushAll(ctx, re, gateway.Message{Body: []byte("y")}, nil); err != nil {
			t.Fatalf("push-all: %v", err)
		}
		if _, err := a.Messages().PullAny(ctx, re, 0, nil); err != nil {
			t.Fatalf("pull-any: %v", err)
		}
		if _, err := reg.Get(ctx, mapping.EncodeName(name)); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatalf("round %d: queue %q came back (registry lookup: %v)", round, name, err)
		}
		st, err := js.Stream(ctx, mapping.StreamName(name))
		if err != nil {
			t.Fatal(err)
		}
		// The queue's own subjects: the shard also holds its keeper.
		var n uint64
		for _, filter := range mapping.QueueSubjects(name) {
			info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range info.State.Subjects {
				n += c
			}
		}
		if n != 0 {
			t.Fatalf("round %d: %d messages of the deleted queue left in its shard", round, n)
		}
	}
}

// TestOtherGatewaysShards: a gateway lists and pull-anys queues whose shard
// streams another gateway created after it started.
func TestOtherGatewaysShards(t *testing.T) {
	t.Parallel()
	ns, a := startCore(t)
	ctx := ctxT(t)
	b, err := gateway.New(ctx, bus.New(testnats.Connect(t, ns, "gateway b")), gateway.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	for i := range 8 {
		mustPush(t, a, fmt.Sprintf("late/%d", i), "x")
	}
	testwait.For(t, "b sees the late queues", func() bool {
		all, err := b.Inspect().QueueStatuses(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range all {
			n += int(s.Size)
		}
		return n == 8
	})
	for range 8 {
		d, err := b.Messages().PullAny(ctx, regexp.MustCompile(`^late/`), 0, nil)
		if err != nil || d == nil {
			t.Fatalf("pull-any through the other gateway: %v, %v", d, err)
		}
		if err := b.Messages().Reply(ctx, d.Queue, d.ID, gateway.Ack); err != nil {
			t.Fatal(err)
		}
	}
}
