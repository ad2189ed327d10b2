package view_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// putSeq is fixture.put returning the stored message's stream sequence.
func (f *fixture) putSeq(t *testing.T, queue, subject, body string, hdr map[string]string) uint64 {
	t.Helper()
	ctx := testCtx(t)
	m, err := f.s.Encode(ctx, queue, subject, store.Content{ContentType: "text/plain", Body: []byte(body)}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	seq, err := f.s.Publish(ctx, "test", queue, m)
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// putGrouped stores a message of group g as the push side does: on the
// group's backlog, and when head is set also as the group's head copy
// standing for it.
func (f *fixture) putGrouped(t *testing.T, queue, g, body string, head bool) (backlog, copySeq uint64) {
	t.Helper()
	backlog = f.putSeq(t, queue, mapping.GroupSubject(queue, g), body, map[string]string{mapping.HdrGroup: g})
	if head {
		copySeq = f.putSeq(t, queue, mapping.HeadSubject(queue, g), body, map[string]string{
			mapping.HdrGroup: g, mapping.HdrGroupSeq: strconv.FormatUint(backlog, 10)})
	}
	return backlog, copySeq
}

// summary renders peeked messages as body/group/priority, for comparing
// whole lists.
func summary(ps []peekedLike) string {
	out := ""
	for i, p := range ps {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%s/%s/%d", p.body, p.group, p.priority)
	}
	return out
}

type peekedLike struct {
	body, group string
	priority    int
}

// TestPeekGroupsInDeliveryOrder: with priorities and ordered groups, Peek
// lists the priority levels high to low; at level 0 the queue's messages and
// the groups' head copies merged by sequence (a head copy once, with its
// group, and never the backlog message it stands for), from just after what
// the level's consumer handed out; then the groups' later messages in
// stream order. Delayed messages are not listed.
func TestPeekGroupsInDeliveryOrder(t *testing.T) {
	const q = "ordered"
	f := newFixture(t, q)
	ctx := testCtx(t)
	f.putSeq(t, q, mapping.QueueSubject(q), "a", nil)
	f.putGrouped(t, q, "G1", "g1-1", true)
	f.putSeq(t, q, mapping.PrioritySubject(q, 5), "high", nil)
	f.putGrouped(t, q, "G1", "g1-2", false)
	f.putSeq(t, q, mapping.QueueSubject(q), "b", nil)
	f.putGrouped(t, q, "G2", "g2-1", true)
	f.putGrouped(t, q, "G2", "g2-2", false)
	f.putSeq(t, q, mapping.ScheduleSubject(q, "later"), "delayed", nil)
	f.putGrouped(t, q, "G1", "g1-3", false)
	f.putSeq(t, q, mapping.DeadSubject(q), "dead", nil)

	peek := func(n int) string {
		t.Helper()
		ps, err := f.r.Peek(ctx, q, n)
		if err != nil {
			t.Fatal(err)
		}
		like := make([]peekedLike, len(ps))
		for i, p := range ps {
			like[i] = peekedLike{string(p.Body), p.Group, p.Priority}
		}
		return summary(like)
	}
	const all = "high//5 a//0 g1-1/G1/0 b//0 g2-1/G2/0 g1-2/G1/0 g2-2/G2/0 g1-3/G1/0"
	if got := peek(10); got != all {
		t.Fatalf("Peek:\n got %s\nwant %s", got, all)
	}
	if got := peek(4); got != "high//5 a//0 g1-1/G1/0 b//0" {
		t.Fatalf("Peek 4: %s", got)
	}
	if got := peek(6); got != "high//5 a//0 g1-1/G1/0 b//0 g2-1/G2/0 g1-2/G1/0" {
		t.Fatalf("Peek 6: %s", got)
	}

	// The level-0 consumer (reading the queue's subject and the heads, as
	// the core makes it) hands out "a" and G1's head: they are in flight,
	// no longer listed, and G1's later messages still wait behind its head.
	cons, err := f.js.CreateOrUpdateConsumer(ctx, mapping.StreamName(q), jetstream.ConsumerConfig{
		Durable:        mapping.ConsumerName(q),
		FilterSubjects: []string{mapping.QueueSubject(q), mapping.HeadWildcard(q)},
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        time.Hour, // in flight for the whole test
	})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.FetchNoWait(2)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for m := range batch.Messages() {
		got = append(got, string(m.Data()))
	}
	if fmt.Sprint(got) != "[a g1-1]" {
		t.Fatalf("fetched %v", got)
	}
	const waiting = "high//5 b//0 g2-1/G2/0 g1-2/G1/0 g2-2/G2/0 g1-3/G1/0"
	if got := peek(10); got != waiting {
		t.Fatalf("Peek with two in flight:\n got %s\nwant %s", got, waiting)
	}
	if oldest, err := f.r.OldestWaiting(ctx, q); err != nil || oldest.IsZero() {
		t.Fatalf("OldestWaiting: %v, %v", oldest, err)
	}
}

// TestPeekGroupsOnly: a queue whose only messages are grouped lists each
// group's head copy, then the messages behind them; a group whose head copy
// is not stored yet shows nothing of its current message.
func TestPeekGroupsOnly(t *testing.T) {
	const q = "groups/only"
	f := newFixture(t, q)
	ctx := testCtx(t)
	for i := range 3 {
		for _, g := range []string{"x", "y"} {
			f.putGrouped(t, q, g, fmt.Sprintf("%s%d", g, i), i == 0)
		}
	}
	f.putGrouped(t, q, "z", "z0", false) // its head copy is being stored
	f.putGrouped(t, q, "z", "z1", false)
	ps, err := f.r.Peek(ctx, q, 50)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(bodies(ps)); got != "[x0 y0 x1 y1 x2 y2 z1]" {
		t.Fatalf("Peek: %s", got)
	}
}
