package store_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// TestPurgeWaitingAndBodies: PurgeWaiting empties every waiting subject of
// the queue and leaves its dead letters and other queues alone; PurgeBodies
// then removes the large bodies only the purged messages referred to,
// keeps a dead letter's, another queue's and those younger than its
// cut-off.
func TestPurgeWaitingAndBodies(t *testing.T) {
	const queue, other = "purged", "kept"
	f, ctx := withShard(t, queue)
	big := bytes.Repeat([]byte("0123456789abcdef"), int(f.nc.MaxPayload()/16)+1)
	store1 := func(q, subject string, body []byte) (object string) {
		t.Helper()
		m, err := f.s.Encode(ctx, q, subject, store.Content{Body: body}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.s.Publish(ctx, "store message", q, m); err != nil {
			t.Fatal(err)
		}
		return m.Header.Get(mapping.HdrObject)
	}
	waitingBig := store1(queue, mapping.QueueSubject(queue), big)
	store1(queue, mapping.PrioritySubject(queue, 3), []byte("p3"))
	store1(queue, mapping.PartSubject(queue), []byte("part"))
	store1(queue, mapping.GroupSubject(queue, "g"), []byte("backlog"))
	store1(queue, mapping.HeadSubject(queue, "g"), []byte("head"))
	deadBig := store1(queue, mapping.DeadSubject(queue), big)
	otherBig := store1(other, mapping.QueueSubject(other), big)
	if waitingBig == "" || deadBig == "" || otherBig == "" {
		t.Fatal("large bodies went inline")
	}

	if err := f.s.Consumers().PurgeWaiting(ctx, queue); err != nil {
		t.Fatal(err)
	}
	st, err := f.js.Stream(ctx, mapping.StreamName(queue))
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range mapping.WaitingSubjects(queue) {
		if _, err := st.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subj)); err == nil {
			t.Errorf("%s still holds a message", subj)
		}
	}
	if _, err := st.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(mapping.DeadSubject(queue))); err != nil {
		t.Errorf("dead letter gone: %v", err)
	}
	ost, err := f.js.Stream(ctx, mapping.StreamName(other))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ost.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(mapping.QueueSubject(other))); err != nil {
		t.Errorf("other queue's message gone: %v", err)
	}

	// A cut-off before the bodies were stored keeps them all.
	f.s.Bodies().PurgeBodies(ctx, queue, time.Now().Add(-time.Hour))
	if _, ok := f.s.Bodies().BodySize(ctx, waitingBig); !ok {
		t.Fatal("a body younger than the cut-off was removed")
	}
	f.s.Bodies().PurgeBodies(ctx, queue, time.Now().Add(time.Second))
	if _, ok := f.s.Bodies().BodySize(ctx, waitingBig); ok {
		t.Error("the purged message's body stays")
	}
	if _, ok := f.s.Bodies().BodySize(ctx, deadBig); !ok {
		t.Error("the dead letter's body was removed")
	}
	if _, ok := f.s.Bodies().BodySize(ctx, otherBig); !ok {
		t.Error("another queue's body was removed")
	}
}
