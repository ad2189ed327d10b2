package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// testCtx bounds a test's requests; reached only on failure.
func testCtx(t *testing.T) context.Context { return testnats.Context(t) }

// TestBus: what the core does over the Bus reaches another connection as
// sent (subject, reply, headers, body), a subscriber's Respond answers a
// Request, and a subject nobody listens on answers ErrNoResponders.
func TestBus(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	a := bus.New(testnats.Connect(t, ns, "a"))
	b := bus.New(testnats.Connect(t, ns, "b"))
	ctx := testCtx(t)

	got := make(chan bus.Msg, 1)
	sub, err := b.Subscribe("bus.msg", func(m bus.Msg) { got <- m })
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Unbounded(); err != nil {
		t.Fatal(err)
	}
	echo, err := b.Subscribe("bus.echo", func(m bus.Msg) {
		_ = m.Respond(append([]byte("re: "), m.Data...))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	m := bus.NewMsg("bus.msg")
	m.Reply = "bus.reply"
	m.Header.Set("Lmq-A", "1")
	m.Header.Add("Lmq-A", "2")
	m.Header.Set("Lmq-B", "x")
	m.Header.Del("Lmq-B")
	m.Data = []byte("body")
	if err := a.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.Subject != "bus.msg" || r.Reply != "bus.reply" || string(r.Data) != "body" ||
			len(r.Header.Values("Lmq-A")) != 2 || r.Header.Get("Lmq-A") != "1" || r.Header.Get("Lmq-B") != "" {
			t.Fatalf("received %+v", r)
		}
	case <-ctx.Done():
		t.Fatal("message not received")
	}
	if err := a.Publish("bus.msg", []byte("plain")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if string(r.Data) != "plain" || r.Reply != "" {
			t.Fatalf("received %+v", r)
		}
		if err := r.Respond(nil); !errors.Is(err, bus.ErrNoReply) {
			t.Fatalf("Respond without a reply subject: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("message not received")
	}

	resp, err := a.Request(ctx, "bus.echo", []byte("hi"))
	if err != nil || string(resp.Data) != "re: hi" {
		t.Fatalf("Request: %q %v", resp.Data, err)
	}
	if err := echo.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Request(ctx, "bus.echo", []byte("hi")); !errors.Is(err, bus.ErrNoResponders) {
		t.Fatalf("Request with nobody listening: %v, want ErrNoResponders", err)
	}
	if err := bus.NewMsg("x").Respond(nil); !errors.Is(err, bus.ErrNoReply) {
		t.Fatalf("Respond of a message made here: %v", err)
	}
	if a.ServerName() == "" || a.MaxPayload() <= 0 {
		t.Fatalf("server %q, max payload %d", a.ServerName(), a.MaxPayload())
	}
}

// TestBusOnReconnect: after a reconnect the connection's own handler runs
// first, then every OnReconnect hook in the order given.
func TestBusOnReconnect(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	calls := make(chan string, 8)
	nc, err := ns.Connect("reconnect", nats.ReconnectHandler(func(*nats.Conn) { calls <- "own" }))
	if err != nil {
		t.Fatal(err)
	}
	nb := bus.New(nc)
	t.Cleanup(func() { _ = nb.Close(time.Second) })
	nb.OnReconnect(func() { calls <- "first" })
	nb.OnReconnect(func() { calls <- "second" })
	if err := nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for _, want := range []string{"own", "first", "second"} {
		select {
		case got := <-calls:
			if got != want {
				t.Fatalf("after a reconnect: %s ran, want %s", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("after a reconnect: %s did not run", want)
		}
	}
}

// TestBusClose: Close flushes and closes; closing again is no error.
func TestBusClose(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	nb := bus.New(testnats.Connect(t, ns, "close"))
	if err := nb.Close(time.Second); err != nil {
		t.Fatal(err)
	}
	if !nb.NATS().IsClosed() {
		t.Fatal("connection open after Close")
	}
	if err := nb.Close(time.Second); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestOpenKV: a Bus opens a bucket on its JetStream, for users that hold no
// Store; a domain and an API prefix together are refused.
func TestOpenKV(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	nb := bus.New(testnats.Connect(t, ns, "openkv"))
	ctx := testCtx(t)
	if _, err := nb.OpenKV(ctx, "d", "p", kv.Config{Bucket: "open"}); err == nil {
		t.Fatal("OpenKV with a domain and an API prefix")
	}
	bkt, err := nb.OpenKV(ctx, "", "", kv.Config{Bucket: "open", Create: kv.CreateOnce, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bkt.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if e, err := bkt.Get(ctx, "k"); err != nil || string(e.Value) != "v" {
		t.Fatalf("Get: %+v %v", e, err)
	}
}
