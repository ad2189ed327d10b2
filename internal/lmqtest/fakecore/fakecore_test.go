package fakecore

import (
	"errors"
	"slices"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// TestHandlesShareOneState: what one handle does, the others and Core see.
func TestHandlesShareOneState(t *testing.T) {
	f := New()
	ctx := t.Context()
	if _, err := f.Messages().Push(ctx, "a", gateway.Message{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if seq, err := f.Messages().PushSeq(ctx, "a", gateway.Message{Body: []byte("y")}, gateway.PushOptions{}); err != nil || seq != 1 {
		t.Fatalf("PushSeq: %d, %v; want 1 (the first of PushSeq)", seq, err)
	}
	if got := f.Queues().QueueNames(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("QueueNames %q, want [a]", got)
	}
	if d, err := f.Inspect().QueueDetail(ctx, "a"); err != nil || d.Size != 2 {
		t.Fatalf("QueueDetail: %+v, %v; want size 2", d, err)
	}
	if f.Size("a") != 2 || f.Pushes() != 2 || len(f.Sent()) != 1 || f.QueueCount() != 1 {
		t.Fatalf("Size %d, Pushes %d, Sent %d, QueueCount %d; want 2, 2, 1, 1", f.Size("a"), f.Pushes(), len(f.Sent()), f.QueueCount())
	}

	d, err := f.Messages().Pull(ctx, "a", 0)
	if err != nil || d == nil {
		t.Fatalf("Pull: %v, %v", d, err)
	}
	if l, err := f.Inspect().Deliveries(ctx, "a"); err != nil || len(l.Deliveries) != 1 || l.Deliveries[0].ID != d.ID {
		t.Fatalf("Deliveries: %+v, %v; want the one pulled", l, err)
	}
	if err := f.Messages().SetVisibility(ctx, "a", d.ID, 0); err != nil || f.Size("a") != 2 {
		t.Fatalf("SetVisibility 0: %v, size %d; want the message back (2)", err, f.Size("a"))
	}

	boom := errors.New("boom")
	f.Fail("Purge", boom)
	if err := f.Queues().Purge(ctx, "a"); !errors.Is(err, boom) {
		t.Fatalf("Purge after Fail: %v, want boom", err)
	}
	f.Fail("Purge", nil)
	if err := f.Queues().Purge(ctx, "a"); err != nil || f.Size("a") != 0 {
		t.Fatalf("Purge: %v, size %d", err, f.Size("a"))
	}

	if created, err := f.Queues().CreateQueue(ctx, "b"); err != nil || !created {
		t.Fatalf("CreateQueue b: %v, %v", created, err)
	}
	if created, err := f.Queues().CreateQueue(ctx, "b"); err != nil || created {
		t.Fatalf("CreateQueue b again: %v, %v; want false", created, err)
	}
	if err := f.Queues().UpdateQueueMeta(ctx, "b", func(m *gateway.QueueMeta) { m.Tags = map[string]string{"k": "v"} }); err != nil {
		t.Fatal(err)
	}
	m, err := f.Queues().QueueMeta(ctx, "b")
	if err != nil || m.Tags["k"] != "v" {
		t.Fatalf("QueueMeta: %+v, %v", m, err)
	}
	m.Tags["k"] = "changed"
	if m, _ := f.Queues().QueueMeta(ctx, "b"); m.Tags["k"] != "v" {
		t.Fatal("QueueMeta handed out the stored tags, not a copy")
	}
}
