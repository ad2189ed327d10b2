package gateway_test

import (
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/testnats"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// TestNotifyWakesWaitingPull: a message published into a queue's subject by
// a plain NATS program, followed by a message on the queue's notify subject,
// reaches a waiting pull at once. The re-poll, which would find the message
// too, is an hour away here, so the notification is the only way: this is
// checked by order, not by measuring how fast the pull is woken.
func TestNotifyWakesWaitingPull(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	ns := testnats.Start(t)
	nc := testnats.Connect(t, ns, "test")
	g, err := gateway.New(ctx, nc, gateway.Config{RepollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)

	const q = "notify/plain"
	retry := 2
	if err := g.UpdateProps(ctx, q, mapping.Props{Retry: &retry}); err != nil { // creates the queue
		t.Fatal(err)
	}
	names, err := mapping.NativeNames(q)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *gateway.Delivery, 1)
	go func() {
		d, _ := g.Pull(ctx, q, 15*time.Second) // far below the re-poll
		got <- d
	}()
	waitFor(t, func() bool { return g.WaitingPulls() == 1 })
	// Counted before its first look into the queue: a moment for that look,
	// so that the message below is found by the notification. (Published
	// before the look, it is found there, and the test proves less but
	// does not fail.)
	time.Sleep(100 * time.Millisecond)
	js := testnats.JetStream(t, nc)
	if _, err := js.Publish(ctx, names.Subject, []byte("plain")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(mapping.NotifySubject(q), nil); err != nil {
		t.Fatal(err)
	}
	d := <-got
	if d == nil || string(d.Message.Body) != "plain" {
		t.Fatalf("waiting pull after a notification: %+v", d)
	}
	if err := g.Reply(ctx, q, d.ID, gateway.Ack); err != nil {
		t.Fatal(err)
	}
}

// TestNotifyAcrossGateways: a push through one gateway wakes a pull waiting
// on another on the same NATS, by the notification alone (the re-poll is an
// hour away). (A version that sent notifications on a NoEcho connection
// of each gateway's own was tried: it cost more CPU per push than reading
// back the gateway's own notifications. Close must leave no connection of
// its own behind.)
func TestNotifyAcrossGateways(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	ns := testnats.Start(t)
	clients := ns.NATS().NumClients()
	var gs [2]*gateway.Gateway
	for i := range gs {
		g, err := gateway.New(ctx, testnats.Connect(t, ns, "test"), gateway.Config{RepollInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Close)
		gs[i] = g
	}
	const q = "notify/across"
	if d, err := gs[1].Pull(ctx, q, 0); d != nil || err != nil { // creates the queue and its consumer
		t.Fatalf("first pull: %+v %v", d, err)
	}
	got := make(chan *gateway.Delivery, 1)
	go func() {
		d, _ := gs[1].Pull(ctx, q, 15*time.Second) // far below the re-poll
		got <- d
	}()
	waitFor(t, func() bool { return gs[1].WaitingPulls() == 1 })
	// A moment for the waiting pull's first look into the empty queue, so
	// that the message is found through the notification (pushed before
	// the look, it is found there: the test proves less but does not fail).
	time.Sleep(100 * time.Millisecond)
	if _, err := gs[0].Push(ctx, q, gateway.Message{Body: []byte("across")}); err != nil {
		t.Fatal(err)
	}
	d := <-got
	if d == nil || string(d.Message.Body) != "across" {
		t.Fatalf("waiting pull on the other gateway: %+v", d)
	}
	if err := gs[1].Reply(ctx, q, d.ID, gateway.Ack); err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		g.Close()
	}
	// Two main connections (closed by their owners, the test) remain.
	waitFor(t, func() bool { return ns.NATS().NumClients() <= clients+2 })
}

// TestNotifyOnlyWithPeers: a gateway alone publishes no notifications (its
// own waiting clients are woken directly); once a second gateway runs it
// does, and after that one's graceful stop it stops again. What reaches a
// plain NATS subscriber is checked by order: everything the gateway
// published before a flush arrives before a marker published after it.
func TestNotifyOnlyWithPeers(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	ns, nc, g := startCoreConn(t, ctx)
	obs := testnats.Connect(t, ns, "observer")
	seen, err := obs.SubscribeSync(mapping.NotifyPrefix + ">")
	if err != nil {
		t.Fatal(err)
	}
	const q = "notify/peers"
	marker := mapping.NotifySubject("notify/marker")
	// notified pushes one message through g and says whether a notification
	// of q reached the subscriber before the marker.
	notified := func() bool {
		t.Helper()
		if _, err := g.Push(ctx, q, gateway.Message{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		if err := nc.FlushWithContext(ctx); err != nil {
			t.Fatal(err)
		}
		if err := obs.Publish(marker, nil); err != nil {
			t.Fatal(err)
		}
		got := false
		for {
			m, err := seen.NextMsgWithContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if m.Subject == marker {
				return got
			}
			got = got || m.Subject == mapping.NotifySubject(q)
		}
	}
	if notified() {
		t.Fatal("a gateway alone published a notification")
	}
	if p := g.Peers(); len(p) != 0 {
		t.Fatalf("peers of a gateway alone: %v", p)
	}

	other, err := gateway.New(ctx, testnats.Connect(t, ns, "test"), gateway.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	waitFor(t, func() bool { return len(g.Peers()) == 1 && g.Peers()[0] == other.ID() })
	waitFor(t, func() bool { return len(other.Peers()) == 1 && other.Peers()[0] == g.ID() })
	if !notified() {
		t.Fatal("no notification with another gateway running")
	}

	other.Close() // says bye
	waitFor(t, func() bool { return len(g.Peers()) == 0 })
	if notified() {
		t.Fatal("a notification after the other gateway stopped")
	}
}
