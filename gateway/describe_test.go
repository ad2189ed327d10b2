package gateway_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// TestConsumerDescriptionNamesQueue: `nats consumer ls` shows a consumer's
// description, so it names the queue; a very long name is cut, and a name
// too long for a consumer name is in the consumer's metadata.
func TestConsumerDescriptionNamesQueue(t *testing.T) {
	t.Parallel()
	ns, g := startCore(t)
	ctx := ctxT(t)
	nc := testnats.Connect(t, ns, "inspect")
	js := testnats.JetStream(t, nc)

	long := strings.Repeat("é", 20) + strings.Repeat("a", 200) // 220 runes, 240 bytes
	want := map[string]string{
		"sensor/42": `lmq queue "sensor/42"`,
		long:        `lmq queue "` + strings.Repeat("é", 20) + strings.Repeat("a", 108) + `"…`,
	}
	for q, desc := range want {
		mustPush(t, g, q, "x")
		if d := mustPull(t, g, q, 0); string(d.Message.Body) != "x" {
			t.Fatalf("pulled %q", d.Message.Body)
		}
		c, err := js.Consumer(ctx, mapping.StreamName(q), mapping.ConsumerName(q))
		if err != nil {
			t.Fatal(err)
		}
		cfg := c.CachedInfo().Config
		if cfg.Description != desc {
			t.Errorf("queue %.20q: description %.40q, want %.40q", q, cfg.Description, desc)
		}
		if cfg.Durable != mapping.EncodeName(q) && cfg.Metadata[mapping.MetaQueueName] != q {
			t.Errorf("queue %.20q: hashed consumer %q without the name in its metadata", q, cfg.Durable)
		}
	}
}

// TestConsumerOnlyWhenUsed: a queue that was only pushed to, or polled
// without waiting while empty, has no consumer; a pull that finds a
// message makes one.
func TestConsumerOnlyWhenUsed(t *testing.T) {
	t.Parallel()
	ns, g := startCore(t)
	ctx := ctxT(t)
	js := testnats.JetStream(t, testnats.Connect(t, ns, "inspect"))
	hasConsumer := func(q string) bool {
		_, err := js.Consumer(ctx, mapping.StreamName(q), mapping.ConsumerName(q))
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	if d, err := g.Messages().Pull(ctx, "polled", 0); d != nil || err != nil {
		t.Fatalf("pull of an empty queue: %v, %v", d, err)
	}
	mustPush(t, g, "pushed", "x")
	if hasConsumer("polled") || hasConsumer("pushed") {
		t.Fatal("a queue never pulled from has a consumer")
	}
	if d := mustPull(t, g, "pushed", 0); string(d.Message.Body) != "x" {
		t.Fatalf("pulled %q", d.Message.Body)
	}
	if !hasConsumer("pushed") {
		t.Fatal("no consumer after a pull that found a message")
	}
	// Nor do dead letters or parts make a queue worth a consumer: nothing
	// of theirs waits (mapping.WaitingOf).
	if err := g.Logs().RegisterQueue(ctx, "buried"); err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{mapping.DeadSubject("buried"), mapping.PartSubject("buried")} {
		if _, err := js.Publish(ctx, subj, []byte("not waiting")); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := g.Messages().Pull(ctx, "buried", 0); d != nil || err != nil {
		t.Fatalf("pull of a queue holding only a dead letter and a part: %v, %v", d, err)
	}
	if hasConsumer("buried") {
		t.Fatal("a queue holding only a dead letter and a part got a consumer from a pull that may not wait")
	}
}
