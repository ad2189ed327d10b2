package e2e

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// natsClient connects a plain nats.go program to the gateway's NATS.
func natsClient(t *testing.T, gw *Gateway) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(gw.NATSURL, nats.Name("e2e native"))
	if err != nil {
		t.Fatalf("connect to %s: %v", gw.NATSURL, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// nativeQueue is what the NATS-native tests start from: a gateway of
// their own, an LMQ client and a plain nats.go program on it, the NATS
// names of the queue under test, and a bound on the test.
type nativeQueue struct {
	c   *Client
	nc  *nats.Conn
	js  jetstream.JetStream
	n   mapping.Native
	ctx context.Context
}

func startNative(t *testing.T, q string, limit time.Duration) nativeQueue {
	t.Helper()
	gw := Start(t)
	nq := nativeQueue{c: gw.Client(t)}
	nq.nc, nq.js = natsClient(t, gw)
	var err error
	if nq.n, err = mapping.NativeNames(q); err != nil {
		t.Fatal(err)
	}
	var cancel context.CancelFunc
	nq.ctx, cancel = context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	return nq
}

// TestNativePublishHTTPPull: a nats.go program publishes into a queue's
// subject (the layout of mapping.NativeNames) and LMQ clients get the
// messages over HTTP, with the metadata the program put in headers.
func TestNativePublishHTTPPull(t *testing.T) {
	t.Parallel()
	const q = "native/in: ü"
	nq := startNative(t, q, 30*time.Second)
	c, nc, js, n, ctx := nq.c, nq.nc, nq.js, nq.n, nq.ctx
	// The stream exists once the queue does; a PATCH creates it.
	c.PatchProps(q, `{"retry":4}`)

	// With metadata headers: content-type, a kept header, a retry of its own.
	m := nats.NewMsg(n.Subject)
	m.Data = []byte(`{"from":"nats"}`)
	m.Header.Set(mapping.HdrContentType, "application/json")
	m.Header.Set(mapping.HdrKeepPrefix+"X-Trace", "abc")
	m.Header.Set(mapping.HdrRetry, "1")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatalf("publish to %s: %v", n.Subject, err)
	}
	r := c.MustPull(q, "5", `{"from":"nats"}`)
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content-type %q", ct)
	}
	if v := r.Header.Get("X-Trace"); v != "abc" {
		t.Errorf("kept header x-trace %q", v)
	}
	if r.Retry() != 1 {
		t.Errorf("retry-remaining %d, want 1 (the message's own Lmq-Retry)", r.Retry())
	}
	c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")

	// Without any header: the queue's retry, LMQ's default content-type.
	if _, err := js.Publish(ctx, n.Subject, []byte("bare")); err != nil {
		t.Fatal(err)
	}
	r = c.MustPull(q, "5", "bare")
	if ct := r.Header.Get("Content-Type"); ct != mapping.DefaultContentType {
		t.Errorf("content-type %q, want %s", ct, mapping.DefaultContentType)
	}
	if r.Retry() != 4 {
		t.Errorf("retry-remaining %d, want the queue's 4", r.Retry())
	}
	c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")

	// A waiting long-poll: a publish alone is noticed at the next re-poll
	// (about 2s); a message on the notify subject wakes it at once.
	for _, notify := range []bool{false, true} {
		type result struct {
			r   *Response
			err error
		}
		done := make(chan result, 1)
		go func() {
			r, err := c.Send(ctx, http.MethodGet, "/messages/"+Q(q)+"?t=10", nil)
			done <- result{r, err}
		}()
		awaitWaitingPulls(t, c, 1)
		start := time.Now()
		if _, err := js.Publish(ctx, n.Subject, []byte("woken")); err != nil {
			t.Fatal(err)
		}
		if notify {
			if err := nc.Publish(n.NotifySubject, nil); err != nil {
				t.Fatal(err)
			}
		}
		res := <-done
		if res.err != nil {
			t.Fatal(res.err)
		}
		ExpectMessage(t, res.r, q, "woken")
		took := time.Since(start)
		// How fast is for lmq-bench: an upper bound here would flake
		// on a loaded machine. (Not woken at all, the t=10 poll would
		// answer 204.)
		t.Logf("notify=%v: long-poll answered %v after the publish", notify, took)
		c.ExpectReply(http.StatusNoContent, q, res.r.ID(), "ack")
	}
	c.PullEmpty(q, "0")
}

// TestNativeConsume: messages pushed over HTTP are consumed by a nats.go
// program from the queue's durable consumer, at least once: an acked message
// is gone, a nacked one goes back to the queue (here to an LMQ client), and
// the program's delivery counts as one of the message's deliveries.
func TestNativeConsume(t *testing.T) {
	t.Parallel()
	const q = "native/out"
	nq := startNative(t, q, 30*time.Second)
	c, js, n, ctx := nq.c, nq.js, nq.n, nq.ctx
	c.Push(q, []byte("one"), "text/plain")
	c.Push(q, []byte("two"), "")

	// Nobody pulled from the queue yet, so it has no consumer: the program
	// makes it as the gateways do (the README's NATS-native section).
	if _, err := js.Consumer(ctx, n.Stream, n.Consumer); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("consumer of a queue never pulled from: %v", err)
	}
	cons, err := js.CreateConsumer(ctx, n.Stream, jetstream.ConsumerConfig{
		Durable:           n.Consumer,
		FilterSubject:     n.Subject,
		AckPolicy:         jetstream.AckExplicitPolicy,
		MaxDeliver:        -1,
		InactiveThreshold: mapping.ConsumerInactive,
	})
	if err != nil {
		t.Fatalf("consumer %s/%s: %v", n.Stream, n.Consumer, err)
	}
	t.Logf("consumer AckWait %v (redelivery of a message a program neither acks nor naks)", cons.CachedInfo().Config.AckWait)
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for m := range batch.Messages() {
		got = append(got, m)
	}
	if batch.Error() != nil {
		t.Fatal(batch.Error())
	}
	if len(got) != 2 || string(got[0].Data()) != "one" || string(got[1].Data()) != "two" {
		t.Fatalf("fetched %d messages: %v", len(got), got)
	}
	if ct := got[0].Headers().Get(mapping.HdrContentType); ct != "text/plain" {
		t.Errorf("%s %q", mapping.HdrContentType, ct)
	}
	if ct := got[1].Headers().Get(mapping.HdrContentType); ct != "" {
		t.Errorf("no content-type given, header says %q", ct)
	}
	if r := got[0].Headers().Get(mapping.HdrRetry); r != "2" {
		t.Errorf("%s %q", mapping.HdrRetry, r)
	}
	// While the program holds them, LMQ clients get neither.
	c.PullEmpty(q, "0")
	// Ack "one" (DoubleAck waits for JetStream's confirmation); give "two" back.
	if err := got[0].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	if err := got[1].Nak(); err != nil {
		t.Fatal(err)
	}
	// The gateway notices a Nak at its next re-poll (about 2s).
	r := c.MustPull(q, "5", "two")
	if r.Retry() != 1 {
		t.Errorf("retry-remaining %d after the program's delivery, want 1", r.Retry())
	}
	c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	c.PullEmpty(q, "0")

	st, err := js.Stream(ctx, n.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := queueInfo(ctx, st, q)
	if err != nil {
		t.Fatal(err)
	}
	if msgs := info.State.Msgs; msgs != 0 {
		t.Errorf("stream %s still holds %d messages", n.Stream, msgs)
	}
}

// TestNativeMsgIDSurvivesNack: a program may publish with Nats-Msg-Id (for
// its own de-duplication). A nack re-publishes the message; the copy must not
// be mistaken for a duplicate of the original (the core drops JetStream's
// Nats-* headers from the copy).
func TestNativeMsgIDSurvivesNack(t *testing.T) {
	t.Parallel()
	const q = "native/msgid"
	nq := startNative(t, q, 20*time.Second)
	c, js, n, ctx := nq.c, nq.js, nq.n, nq.ctx
	c.PatchProps(q, `{}`)
	m := nats.NewMsg(n.Subject)
	m.Data = []byte("once")
	m.Header.Set(jetstream.MsgIDHeader, "order-42")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	r := c.MustPull(q, "5", "once")
	c.ExpectReply(http.StatusNoContent, q, r.ID(), "nack")
	r = c.Pull(q, "3")
	if r.Status != http.StatusOK {
		t.Fatalf("after a nack the message is gone (%v): the re-published copy kept Nats-Msg-Id and JetStream dropped it as a duplicate", r)
	}
	ExpectMessage(t, r, q, "once")
	c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
}
