package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// testCtx bounds a test's requests; reached only on failure.
func testCtx(t *testing.T) context.Context { return testnats.Context(t) }

// fixture is a Store on a fresh embedded server.
type fixture struct {
	nc *nats.Conn
	js jetstream.JetStream
	s  *store.Store
}

func newFixture(t *testing.T, cfg store.Config) *fixture {
	t.Helper()
	nc, js := testnats.Client(t, "store-test")
	return &fixture{nc: nc, js: js, s: store.New(nc, js, cfg)}
}

// withShard is a fixture whose store made queue's shard stream, and a
// context for the test's requests.
func withShard(t *testing.T, queue string) (*fixture, context.Context) {
	t.Helper()
	f := newFixture(t, store.Config{})
	ctx := testCtx(t)
	if _, err := f.s.Shards().QueueShard(ctx, queue); err != nil {
		t.Fatal(err)
	}
	return f, ctx
}

// stored reads back the message at seq of queue's stream.
func (f *fixture) stored(t *testing.T, queue string, seq uint64) *bus.Msg {
	t.Helper()
	ctx := testCtx(t)
	st, err := f.js.Stream(ctx, mapping.StreamName(queue))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetMsg(ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	return &bus.Msg{Subject: raw.Subject, Header: bus.Headers(raw.Header), Data: raw.Data}
}

// TestPublishRemakesStream: a message whose shard stream is gone (an
// operator deleted it) makes the store create it again and then store the
// message; what is stored reads back as it was given.
func TestPublishRemakesStream(t *testing.T) {
	const queue = "remade"
	f, ctx := withShard(t, queue)
	if err := f.js.DeleteStream(ctx, mapping.StreamName(queue)); err != nil {
		t.Fatal(err)
	}
	in := store.Content{ContentType: "text/plain", Body: []byte("hello"), Kept: []store.Header{{Name: "x-trace", Value: "7"}}}
	m, err := f.s.Encode(ctx, queue, mapping.QueueSubject(queue), in, 3)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := f.s.Publish(ctx, "store message", queue, m)
	if err != nil || seq != 1 {
		t.Fatalf("Publish: seq %d, %v", seq, err)
	}
	back := f.stored(t, queue, seq)
	if got := back.Header.Get(mapping.HdrRetry); got != "3" {
		t.Errorf("retry stamp %q, want 3", got)
	}
	if _, err := strconv.ParseInt(back.Header.Get(mapping.HdrPushedAt), 10, 64); err != nil {
		t.Errorf("push time stamp: %v", err)
	}
	out, err := f.s.Decode(ctx, back)
	if err != nil {
		t.Fatal(err)
	}
	if out.ContentType != in.ContentType || !bytes.Equal(out.Body, in.Body) ||
		len(out.Kept) != 1 || out.Kept[0] != in.Kept[0] {
		t.Fatalf("read back %+v, stored %+v", out, in)
	}
}

// TestPublishNoStreamIsUnavailable: when no stream takes a message until the
// deadline, nothing was stored, and the answer says so (ErrUnavailable, a
// client may retry), never "maybe stored".
func TestPublishNoStreamIsUnavailable(t *testing.T) {
	f := newFixture(t, store.Config{})
	ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	// A subject no shard stream takes: the store makes the queue's shard,
	// and still no stream answers.
	const nowhere = "nowhere.at.all"
	_, err := f.s.Publish(ctx, "store message", "nowhere", bus.NewMsg(nowhere))
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrUnknown) {
		t.Fatalf("Publish without a stream: %v, want ErrUnavailable only", err)
	}
	msgs := batch("nowhere", 2)
	for _, m := range msgs {
		m.Subject = nowhere
	}
	err = f.s.PublishBatch(testCtx(t), msgs)
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrUnknown) {
		t.Fatalf("PublishBatch without a stream: %v, want ErrUnavailable only", err)
	}
}

// batch is n messages of queue.
func batch(queue string, n int) []*bus.Msg {
	msgs := make([]*bus.Msg, n)
	for i := range msgs {
		m := bus.NewMsg(mapping.QueueSubject(queue))
		m.Data = []byte(strconv.Itoa(i))
		msgs[i] = m
	}
	return msgs
}

// TestPublishBatch: a committed batch is stored whole and in order.
func TestPublishBatch(t *testing.T) {
	const queue = "batched"
	f, ctx := withShard(t, queue)
	if err := f.s.PublishBatch(ctx, batch(queue, 3)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if got := string(f.stored(t, queue, uint64(i+1)).Data); got != strconv.Itoa(i) {
			t.Fatalf("message %d is %q", i+1, got)
		}
	}
}

// TestHealthFailsStoresAtOnce: while the server reports a store failure
// nothing is attempted, the failure is what readiness sees, and the first
// store that succeeds afterwards clears it.
func TestHealthFailsStoresAtOnce(t *testing.T) {
	var full atomic.Bool
	full.Store(true)
	f := newFixture(t, store.Config{Health: func() error {
		if full.Load() {
			return errors.New("no space left on device")
		}
		return nil
	}})
	ctx := testCtx(t)
	const queue = "healthy"
	if _, err := f.s.Shards().QueueShard(ctx, queue); err != nil {
		t.Fatal(err)
	}
	_, err := f.s.Publish(ctx, "store message", queue, bus.NewMsg(mapping.QueueSubject(queue)))
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Publish on a full disk: %v, want ErrUnavailable", err)
	}
	if f.s.Failure() == nil || f.s.Failures() != 1 {
		t.Fatalf("after a refused store: Failure %v, Failures %d", f.s.Failure(), f.s.Failures())
	}
	if info, err := f.js.Stream(ctx, mapping.StreamName(queue)); err != nil || info.CachedInfo().State.Msgs != 0 {
		t.Fatalf("a refused store reached the stream: %v", err)
	}
	full.Store(false)
	if _, err := f.s.Publish(ctx, "store message", queue, bus.NewMsg(mapping.QueueSubject(queue))); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Failure(); err != nil {
		t.Fatalf("Failure after a store succeeded: %v", err)
	}
	if err := f.s.Probe(ctx, "gw.test"); err != nil {
		t.Fatalf("Probe: %v", err)
	}
}

// TestLargeBodies: a body beyond one NATS message goes to the Object Store
// (Encode, or PutBody for a streamed one), reads back whole, and once
// dropped reads as lost for good (BodyLost), not as unavailable.
func TestLargeBodies(t *testing.T) {
	f := newFixture(t, store.Config{})
	ctx := testCtx(t)
	const queue = "large"
	big := bytes.Repeat([]byte("0123456789abcdef"), int(f.nc.MaxPayload()/16)+1)

	m, err := f.s.Encode(ctx, queue, mapping.QueueSubject(queue), store.Content{Body: big}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(mapping.HdrObject) == "" || len(m.Data) != 0 {
		t.Fatalf("a body of %d bytes went inline (limit %d)", len(big), f.s.InlineLimit())
	}
	if out, err := f.s.Decode(ctx, m); err != nil || !bytes.Equal(out.Body, big) {
		t.Fatalf("Decode: %d bytes, %v", len(out.Body), err)
	}

	name, size, err := f.s.Bodies().PutBody(ctx, queue, big[:10], bytes.NewReader(big[10:]))
	if err != nil || size != int64(len(big)) {
		t.Fatalf("PutBody: %d bytes, %v", size, err)
	}
	if got, ok := f.s.Bodies().BodySize(ctx, name); !ok || got != size {
		t.Fatalf("BodySize %d %v, want %d", got, ok, size)
	}
	ref, err := f.s.Encode(ctx, queue, mapping.QueueSubject(queue), store.Content{Object: name}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := f.s.Decode(ctx, ref); err != nil || !bytes.Equal(out.Body, big) {
		t.Fatalf("Decode of a streamed body: %d bytes, %v", len(out.Body), err)
	}

	f.s.Bodies().DropBody(ctx, ref)
	if _, err := f.s.Decode(ctx, ref); !store.BodyLost(err) {
		t.Fatalf("Decode of a dropped body: %v, want lost for good", err)
	}
	f.s.Bodies().DeleteQueueBodies(ctx, queue)
	if _, err := f.s.Decode(ctx, m); !store.BodyLost(err) {
		t.Fatalf("Decode after DeleteQueueBodies: %v, want lost for good", err)
	}
}

// TestPutBodyReaderError: a body that fails to read comes back as the
// reader's error, not as the store's, and leaves nothing behind.
func TestPutBodyReaderError(t *testing.T) {
	f := newFixture(t, store.Config{})
	ctx := testCtx(t)
	cause := errors.New("client went away")
	r := io.MultiReader(bytes.NewReader(make([]byte, 300<<10)), failing{cause})
	_, _, err := f.s.Bodies().PutBody(ctx, "broken", nil, r)
	if !errors.Is(err, cause) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("PutBody with a failing reader: %v, want the reader's error only", err)
	}
	if f.s.Failures() != 0 {
		t.Fatalf("a reader's error counted as a store failure")
	}
	obj, err := f.js.ObjectStore(ctx, mapping.ObjectBucket)
	if err != nil {
		t.Fatal(err)
	}
	if list, err := obj.List(ctx); !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Fatalf("objects left behind: %v %v", list, err)
	}
}

type failing struct{ err error }

func (f failing) Read([]byte) (int, error) { return 0, f.err }

// TestLog: stored messages are read back and removed by sequence; one
// removed is not found any more.
func TestLog(t *testing.T) {
	f := newFixture(t, store.Config{})
	ctx := testCtx(t)
	const queue = "log"
	for _, body := range []string{"one", "two"} {
		m := bus.NewMsg(mapping.QueueSubject(queue))
		m.Data = []byte(body)
		if _, err := f.s.Publish(ctx, "store message", queue, m); err != nil {
			t.Fatal(err)
		}
	}
	l, err := f.s.OpenLog(ctx, queue)
	if err != nil || l.LastSeq() != 2 {
		t.Fatalf("OpenLog: %v, last sequence %d", err, l.LastSeq())
	}
	if rm, err := l.Next(ctx, mapping.QueueSubject(queue), 1); err != nil || rm == nil || rm.Seq != 1 {
		t.Fatalf("Next from 1: %+v, %v", rm, err)
	}
	if err := l.Delete(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if has, err := l.Has(ctx, 1); err != nil || has {
		t.Fatalf("Has(1) after Delete: %v, %v", has, err)
	}
	// A message already gone (another gateway closed the window first, or
	// a crash came between the delete and its record) is deleted alike.
	if err := l.Delete(ctx, 1); err != nil {
		t.Fatalf("Delete of a message already gone: %v", err)
	}
	if rm, err := l.Next(ctx, mapping.QueueSubject(queue), 1); err != nil || rm == nil || rm.Seq != 2 {
		t.Fatalf("Next from 1 after Delete: %+v, %v", rm, err)
	}
	if body, err := f.s.ReadBack(ctx, queue, 2); err != nil || string(body) != "two" {
		t.Fatalf("ReadBack(2): %q, %v", body, err)
	}
	f.s.TakeBack(ctx, queue, 2)
	if rm, err := l.Next(ctx, mapping.QueueSubject(queue), 1); err != nil || rm != nil {
		t.Fatalf("Next after TakeBack: %+v, %v", rm, err)
	}
}
