package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// TestBus: what the core does over the Bus reaches another connection as
// sent (subject, reply, headers, body), a subscriber's Respond answers a
// Request, and a subject nobody listens on answers ErrNoResponders.
func TestBus(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	a := store.NewBus(testnats.Connect(t, ns, "a"))
	b := store.NewBus(testnats.Connect(t, ns, "b"))
	ctx := testCtx(t)

	got := make(chan store.Msg, 1)
	sub, err := b.Subscribe("bus.msg", func(m store.Msg) { got <- m })
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Unbounded(); err != nil {
		t.Fatal(err)
	}
	echo, err := b.Subscribe("bus.echo", func(m store.Msg) {
		_ = m.Respond(append([]byte("re: "), m.Data...))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	m := store.NewMsg("bus.msg")
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
		if err := r.Respond(nil); !errors.Is(err, store.ErrNoReply) {
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
	if _, err := a.Request(ctx, "bus.echo", []byte("hi")); !errors.Is(err, store.ErrNoResponders) {
		t.Fatalf("Request with nobody listening: %v, want ErrNoResponders", err)
	}
	if err := store.NewMsg("x").Respond(nil); !errors.Is(err, store.ErrNoReply) {
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
	bus := store.NewBus(nc)
	t.Cleanup(func() { _ = bus.Close(time.Second) })
	bus.OnReconnect(func() { calls <- "first" })
	bus.OnReconnect(func() { calls <- "second" })
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
	bus := store.NewBus(testnats.Connect(t, ns, "close"))
	if err := bus.Close(time.Second); err != nil {
		t.Fatal(err)
	}
	if !bus.NATS().IsClosed() {
		t.Fatal("connection open after Close")
	}
	if err := bus.Close(time.Second); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestOpen: a Store opened on a Bus stores and reads back; a domain and an
// API prefix together are refused.
func TestOpen(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	bus := store.NewBus(testnats.Connect(t, ns, "open"))
	ctx := testCtx(t)
	if _, err := store.Open(bus, store.Config{Domain: "d", APIPrefix: "p"}); err == nil {
		t.Fatal("Open with a domain and an API prefix")
	}
	s, err := store.Open(bus, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Encode(ctx, "open", mapping.QueueSubject("open"), store.Content{Body: []byte("x")}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.QueueShard(ctx, "open"); err != nil {
		t.Fatal(err)
	}
	if seq, err := s.Publish(ctx, "store message", "open", m); err != nil || seq != 1 {
		t.Fatalf("Publish: %d %v", seq, err)
	}
	bkt, err := bus.OpenKV(ctx, "", "", kv.Config{Bucket: "open", Create: kv.CreateOnce, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bkt.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
}
