package gateway_test

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// listed is the bodies of the queue's waiting messages as Messages lists
// them (with bodies), and their ids.
func listed(t *testing.T, g *gateway.Gateway, q string) ([]string, []uint64) {
	t.Helper()
	ps, err := g.Inspect().Messages(ctxT(t), q, gateway.MaxPeek, true)
	if err != nil {
		t.Fatal(err)
	}
	bodies, ids := make([]string, len(ps)), make([]uint64, len(ps))
	for i, p := range ps {
		bodies[i], ids[i] = string(p.Body), p.Seq
	}
	return bodies, ids
}

// TestDeleteMessage: a waiting message is removed by its id and never
// delivered; one in flight, one gone, a dead letter, a delayed message and
// another queue's message are not found; ids that are not ids are invalid.
func TestDeleteMessage(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	const q = "del/one"
	for _, b := range []string{"a", "b", "c"} {
		mustPush(t, g, q, b)
	}
	if _, err := g.Messages().PushWith(ctx, q, gateway.Message{Body: []byte("later")}, gateway.PushOptions{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	mustPush(t, g, "del/other", "theirs")
	bodies, ids := listed(t, g, q)
	if fmt.Sprint(bodies) != "[a b c]" {
		t.Fatalf("listed %v", bodies)
	}
	if ps, err := g.Inspect().Messages(ctx, q, 1, false); err != nil || len(ps) != 1 || ps[0].Body != nil || ps[0].Size != 1 {
		t.Fatalf("Messages without bodies: %+v, %v", ps, err)
	}
	for _, n := range []int{0, -1, gateway.MaxPeek + 1} {
		if _, err := g.Inspect().Messages(ctx, q, n, false); !errors.Is(err, gateway.ErrInvalid) {
			t.Fatalf("Messages n=%d: %v", n, err)
		}
	}
	if _, err := g.Inspect().Messages(ctx, "del/none", 10, false); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("Messages of no queue: %v", err)
	}

	inFlight := mustPull(t, g, q, time.Second) // "a"
	if err := g.Inspect().DeleteMessage(ctx, q, ids[0]); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("delete in flight: %v", err)
	}
	if err := g.Inspect().DeleteMessage(ctx, q, ids[1]); err != nil {
		t.Fatalf("delete waiting: %v", err)
	}
	if err := g.Inspect().DeleteMessage(ctx, q, ids[1]); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if err := g.Inspect().DeleteMessage(ctx, q, 0); !errors.Is(err, gateway.ErrInvalid) {
		t.Fatalf("delete id 0: %v", err)
	}
	if err := g.Inspect().DeleteMessage(ctx, "del/none", ids[2]); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("delete on no queue: %v", err)
	}
	// Every other sequence of the queue's shard stream that is not one of
	// its waiting messages: the delayed message, the other queue's (when it
	// shares the shard), sequences beyond the last.
	for seq := uint64(1); seq < ids[2]+20; seq++ {
		if seq == ids[2] {
			continue
		}
		if err := g.Inspect().DeleteMessage(ctx, q, seq); !errors.Is(err, gateway.ErrNotFound) {
			t.Fatalf("delete seq %d: %v", seq, err)
		}
	}
	if bodies, _ := listed(t, g, q); fmt.Sprint(bodies) != "[c]" {
		t.Fatalf("listed after delete: %v", bodies)
	}
	if err := g.Messages().Reply(ctx, q, inFlight.ID, gateway.Ack); err != nil {
		t.Fatalf("ack of the in-flight message: %v", err)
	}
	if d := mustPull(t, g, q, time.Second); string(d.Message.Body) != "c" {
		t.Fatalf("pulled %q, want c", d.Message.Body)
	}
	if d, err := g.Messages().Pull(ctx, q, 0); d != nil || err != nil {
		t.Fatalf("pulled %v, %v: the deleted message came back", d, err)
	}
	if det, err := g.Inspect().QueueDetail(ctx, "del/other"); err != nil || det.Size != 1 {
		t.Fatalf("the other queue: %+v, %v", det, err)
	}
}

// TestDeleteMessageLargeBody: deleting a message whose body is in the
// Object Store removes that object too.
func TestDeleteMessageLargeBody(t *testing.T) {
	t.Parallel()
	_, nc, g := startCoreConn(t)
	ctx := ctxT(t)
	const q = "del/big"
	big := bytes.Repeat([]byte("x"), int(nc.MaxPayload())+1)
	if _, err := g.Messages().Push(ctx, q, gateway.Message{Body: big}); err != nil {
		t.Fatal(err)
	}
	ps, err := g.Inspect().Messages(ctx, q, 1, true)
	if err != nil || len(ps) != 1 || !ps[0].Object || ps[0].Size != int64(len(big)) {
		t.Fatalf("Messages: %+v, %v", ps, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, mapping.StreamName(q))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetMsg(ctx, ps[0].Seq)
	if err != nil {
		t.Fatal(err)
	}
	ref := raw.Header.Get(mapping.HdrObject)
	obj, err := js.ObjectStore(ctx, mapping.ObjectBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obj.GetInfo(ctx, ref); err != nil {
		t.Fatalf("the body before: %v", err)
	}
	if err := g.Inspect().DeleteMessage(ctx, q, ps[0].Seq); err != nil {
		t.Fatal(err)
	}
	if _, err := obj.GetInfo(ctx, ref); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Fatalf("the body after: %v, want not found", err)
	}
}

// groupFixture stores grouped messages by hand, as the push side does.
type groupFixture struct {
	t  *testing.T
	js jetstream.JetStream
	q  string
}

func (f *groupFixture) publish(subject, body string, hdr map[string]string) uint64 {
	f.t.Helper()
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	ack, err := f.js.PublishMsg(ctxT(f.t), m)
	if err != nil {
		f.t.Fatal(err)
	}
	return ack.Sequence
}

// backlog stores a message on group g's backlog.
func (f *groupFixture) backlog(g, body string) uint64 {
	return f.publish(mapping.GroupSubject(f.q, g), body, map[string]string{mapping.HdrGroup: g})
}

// head stores group g's head copy of its backlog message seq.
func (f *groupFixture) head(g, body string, seq uint64) uint64 {
	return f.publish(mapping.HeadSubject(f.q, g), body, map[string]string{
		mapping.HdrGroup: g, mapping.HdrGroupSeq: strconv.FormatUint(seq, 10)})
}

// has reports whether the queue's stream holds seq.
func (f *groupFixture) has(seq uint64) bool {
	f.t.Helper()
	st, err := f.js.Stream(ctxT(f.t), mapping.StreamName(f.q))
	if err != nil {
		f.t.Fatal(err)
	}
	_, err = st.GetMsg(ctxT(f.t), seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return true
}

// TestDeleteGroupMessages: a message behind its group's head is removed
// alone; a waiting head copy, addressed by its own id or by the backlog
// message's it stands for, goes with the group moved on; a head copy in
// flight is not found by either id; a group's current message between head
// copies is not found.
func TestDeleteGroupMessages(t *testing.T) {
	t.Parallel()
	_, nc, g := startCoreConn(t)
	ctx := ctxT(t)
	const q = "del/groups"
	mustPush(t, g, q, "plain") // the queue and its shard stream
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	f := &groupFixture{t: t, js: js, q: q}

	a1 := f.backlog("A", "a1")
	ha1 := f.head("A", "a1", a1)
	a2 := f.backlog("A", "a2")
	a3 := f.backlog("A", "a3")
	b1 := f.backlog("B", "b1")
	hb1 := f.head("B", "b1", b1)
	c1 := f.backlog("C", "c1") // its head copy is being stored
	c2 := f.backlog("C", "c2")
	if bodies, ids := listed(t, g, q); fmt.Sprint(bodies) != "[plain a1 b1 a2 a3 c2]" || ids[1] != ha1 || ids[2] != hb1 || ids[3] != a2 {
		t.Fatalf("listed %v %v", bodies, ids)
	}

	// Behind the head: alone.
	if err := g.Inspect().DeleteMessage(ctx, q, a2); err != nil {
		t.Fatalf("delete a2: %v", err)
	}
	if f.has(a2) || !f.has(ha1) || !f.has(a1) || !f.has(a3) {
		t.Fatal("a2's delete removed another message, or not a2")
	}
	if err := g.Inspect().DeleteMessage(ctx, q, a2); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("delete a2 twice: %v", err)
	}
	// A waiting head copy by its id; B's by the backlog message's.
	if err := g.Inspect().DeleteMessage(ctx, q, ha1); err != nil {
		t.Fatalf("delete A's head: %v", err)
	}
	if f.has(ha1) {
		t.Fatal("A's head copy still there")
	}
	if err := g.Inspect().DeleteMessage(ctx, q, b1); err != nil {
		t.Fatalf("delete b1 through its head: %v", err)
	}
	if f.has(hb1) {
		t.Fatal("B's head copy still there")
	}
	// C's current message has no head copy yet: not found; c2 is behind it.
	if err := g.Inspect().DeleteMessage(ctx, q, c1); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("delete c1 without a head copy: %v", err)
	}
	if err := g.Inspect().DeleteMessage(ctx, q, c2); err != nil || f.has(c2) || !f.has(c1) {
		t.Fatalf("delete c2: %v", err)
	}

	// A head copy in flight: the level-0 consumer (reading heads beside the
	// queue's subject) hands it out.
	const q2 = "del/groups/flight"
	mustPush(t, g, q2, "plain")
	f2 := &groupFixture{t: t, js: js, q: q2}
	d1 := f2.backlog("D", "d1")
	hd1 := f2.head("D", "d1", d1)
	d2 := f2.backlog("D", "d2")
	cons, err := js.CreateOrUpdateConsumer(ctx, mapping.StreamName(q2), jetstream.ConsumerConfig{
		Durable:        mapping.ConsumerName(q2),
		FilterSubjects: []string{mapping.QueueSubject(q2), mapping.HeadWildcard(q2)},
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
	n := 0
	for range batch.Messages() {
		n++
	}
	if n != 2 {
		t.Fatalf("fetched %d", n)
	}
	for _, seq := range []uint64{hd1, d1} {
		if err := g.Inspect().DeleteMessage(ctx, q2, seq); !errors.Is(err, gateway.ErrNotFound) {
			t.Fatalf("delete %d of a head in flight: %v", seq, err)
		}
	}
	if !f2.has(hd1) || !f2.has(d1) {
		t.Fatal("a head in flight was removed")
	}
	if err := g.Inspect().DeleteMessage(ctx, q2, d2); err != nil || f2.has(d2) {
		t.Fatalf("delete d2 behind a head in flight: %v", err)
	}
}

// Deleting a group's waiting head (by its listed id) removes that message
// and makes the group's next message available; the list shows the group.
func TestDeleteGroupHeadPromotesNext(t *testing.T) {
	g := newCore(t)
	ctx := ctxT(t)
	const q = "del/grp"
	for _, b := range []string{"g1", "g2", "g3"} {
		if _, err := g.Messages().PushWith(ctx, q, gateway.Message{Body: []byte(b)}, gateway.PushOptions{Group: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := g.Inspect().Messages(ctx, q, 10, true)
	if err != nil || len(ps) != 3 || string(ps[0].Body) != "g1" || ps[0].Group != "k" {
		t.Fatalf("listed %+v, %v; want g1, g2, g3 of group k", ps, err)
	}
	if err := g.Inspect().DeleteMessage(ctx, q, ps[0].Seq); err != nil {
		t.Fatal(err)
	}
	d, err := g.Messages().Pull(ctx, q, 20*time.Second)
	if err != nil || d == nil || string(d.Message.Body) != "g2" || d.Group != "k" {
		t.Fatalf("after deleting the head: %+v, %v; want g2 of group k", d, err)
	}
}
