package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// TestShardHandle: a queue's shard handle counts its subjects, reads its
// messages by subject and sequence in the store's types, tells a missing
// consumer or message as a value (no error), removes a message twice
// without complaint, and purges one subject, saying how many it held.
func TestShardHandle(t *testing.T) {
	const queue = "handle"
	f, ctx := withShard(t, queue)
	sh, err := f.s.Shards().QueueShard(ctx, queue)
	if err != nil {
		t.Fatal(err)
	}
	if sh.Index() != mapping.Shard(queue) {
		t.Fatalf("index %d, want %d", sh.Index(), mapping.Shard(queue))
	}
	put := func(subject, body string) {
		t.Helper()
		m := bus.NewMsg(subject)
		m.Header.Set(mapping.HdrContentType, "text/plain")
		m.Data = []byte(body)
		if _, err := f.s.Publish(ctx, "test", queue, m); err != nil {
			t.Fatal(err)
		}
	}
	put(mapping.QueueSubject(queue), "one")
	put(mapping.DeadSubject(queue), "dead 1")
	put(mapping.DeadSubject(queue), "dead 2")

	info, err := sh.Info(ctx, mapping.DeadSubject(queue))
	if err != nil || info.Subjects[mapping.DeadSubject(queue)] != 2 || info.Msgs < 3 || info.Bytes == 0 || info.At.IsZero() {
		t.Fatalf("info %+v, %v", info, err)
	}
	m, err := sh.Next(ctx, mapping.DeadSubject(queue), 1)
	if err != nil || m == nil || string(m.Data) != "dead 1" || m.Subject != mapping.DeadSubject(queue) ||
		m.Header.Get(mapping.HdrContentType) != "text/plain" || m.Time.IsZero() {
		t.Fatalf("next dead letter: %+v, %v", m, err)
	}
	if c, err := f.s.DecodeStored(ctx, m); err != nil || string(c.Body) != "dead 1" || c.ContentType != "text/plain" {
		t.Fatalf("decoded %+v, %v", c, err)
	}
	if none, err := sh.Next(ctx, mapping.QueueSubject(queue), m.Seq+10); none != nil || err != nil {
		t.Fatalf("next past the end: %+v, %v", none, err)
	}
	if _, found, err := sh.Consumer(ctx, mapping.ConsumerName(queue)); found || err != nil {
		t.Fatalf("consumer before any: found %v, %v", found, err)
	}
	if _, err := f.s.Consumers().MakeConsumer(ctx, queue, 0, store.Limits{AckWait: time.Minute}); err != nil {
		t.Fatal(err)
	}
	c, found, err := sh.Consumer(ctx, mapping.ConsumerName(queue))
	if !found || err != nil || c.Filter != mapping.QueueSubject(queue) || c.Delivered != 0 || c.AckPending != 0 {
		t.Fatalf("consumer %+v found %v, %v", c, found, err)
	}
	if cs, err := sh.Consumers(ctx); err != nil || len(cs) != 1 || cs[0] != c {
		t.Fatalf("consumers %+v, %v", cs, err)
	}
	for range 2 {
		if err := sh.Delete(ctx, m.Seq); err != nil {
			t.Fatalf("delete (again): %v", err)
		}
	}
	n, err := sh.PurgeSubject(ctx, mapping.DeadSubject(queue))
	if err != nil || n != 1 {
		t.Fatalf("purged %d, %v; want 1", n, err)
	}
	counts, err := sh.SubjectCounts(ctx, mapping.SubjectPrefix+".>")
	if err != nil || counts[mapping.DeadSubject(queue)] != 0 || counts[mapping.QueueSubject(queue)] != 1 {
		t.Fatalf("counts %v, %v", counts, err)
	}
	// A stream an operator deleted: its handle's reads fail as unavailable
	// (not "not there"), and the core tells the stream gone.
	if err := f.js.DeleteStream(ctx, mapping.StreamName(queue)); err != nil {
		t.Fatal(err)
	}
	if _, err := sh.Next(ctx, mapping.QueueSubject(queue), 1); !errors.Is(err, store.ErrUnavailable) || !store.StreamGone(err) {
		t.Fatalf("read of a deleted stream: %v", err)
	}
}
