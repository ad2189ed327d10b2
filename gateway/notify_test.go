package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// TestNotifyWakesWaitingPull: a message published into a queue's subject by
// a plain NATS program, followed by a message on the queue's notify subject,
// reaches a waiting pull at once. The re-poll, which would find the message
// too, is an hour away here, so the notification is the only way: this is
// checked by order, not by measuring how fast the pull is woken.
func TestNotifyWakesWaitingPull(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	ns, nc, g := startCoreWith(t, gateway.Config{RepollInterval: time.Hour})

	const q = "notify/plain"
	retry := 2
	if err := g.Queues().UpdateProps(ctx, q, mapping.Props{Retry: &retry}); err != nil { // creates the queue
		t.Fatal(err)
	}
	names, err := mapping.NativeNames(q)
	if err != nil {
		t.Fatal(err)
	}
	looks := watchLooks(t, ns)
	got := make(chan *gateway.Delivery, 1)
	go func() {
		d, _ := g.Messages().Pull(ctx, q, 15*time.Second) // far below the re-poll
		got <- d
	}()
	// The message is published after the waiting pull found the queue
	// empty, so that only the notification can lead to it.
	looks.awaitEmpty(ctx)
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
	if err := g.Messages().Reply(ctx, q, d.ID, gateway.Ack); err != nil {
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
		g, err := gateway.New(ctx, bus.New(testnats.Connect(t, ns, "test")), gateway.Config{RepollInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Close)
		gs[i] = g
	}
	const q = "notify/across"
	if d, err := gs[1].Messages().Pull(ctx, q, 0); d != nil || err != nil { // creates the queue and its consumer
		t.Fatalf("first pull: %+v %v", d, err)
	}
	looks := watchLooks(t, ns)
	got := make(chan *gateway.Delivery, 1)
	go func() {
		d, _ := gs[1].Messages().Pull(ctx, q, 15*time.Second) // far below the re-poll
		got <- d
	}()
	// Pushed after the waiting pull found the queue empty: only the
	// notification can lead to it.
	looks.awaitEmpty(ctx)
	if _, err := gs[0].Messages().Push(ctx, q, gateway.Message{Body: []byte("across")}); err != nil {
		t.Fatal(err)
	}
	d := <-got
	if d == nil || string(d.Message.Body) != "across" {
		t.Fatalf("waiting pull on the other gateway: %+v", d)
	}
	if err := gs[1].Messages().Reply(ctx, q, d.ID, gateway.Ack); err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		g.Close()
	}
	// Two main connections (closed by their owners, the test) remain.
	testwait.For(t, "ns.NATS().NumClients() <= clients+2", func() bool { return ns.NATS().NumClients() <= clients+2 })
}

// TestNotifyOnlyWithPeers: a gateway alone publishes no notifications (its
// own waiting clients are woken directly); once a second gateway runs it
// does, and after that one's graceful stop it stops again. What reaches a
// plain NATS subscriber is checked by order: everything the gateway
// published before a flush arrives before a marker published after it.
func TestNotifyOnlyWithPeers(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	ns, nc, g := startCoreConn(t)
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
		if _, err := g.Messages().Push(ctx, q, gateway.Message{Body: []byte("x")}); err != nil {
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

	other, err := gateway.New(ctx, bus.New(testnats.Connect(t, ns, "test")), gateway.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	knowEachOther(t, g, other)
	if p, o := g.Peers(), other.Peers(); len(p) != 1 || len(o) != 1 {
		t.Fatalf("peers %v and %v; want each other only", p, o)
	}
	if !notified() {
		t.Fatal("no notification with another gateway running")
	}

	heard := gateway.Signals(g).PeerHeard
	heard.Init(t)
	other.Close() // says bye
	heard.WaitUntil("the other gateway's bye", func() bool { return len(g.Peers()) == 0 })
	if notified() {
		t.Fatal("a notification after the other gateway stopped")
	}
}

// looks sees every message of a test's NATS server (a subscription to ">",
// which keeps their order): the pull requests the gateways send and the
// answers JetStream gives them.
type looks struct {
	t   *testing.T
	nc  *nats.Conn
	sub *nats.Subscription
}

func watchLooks(t *testing.T, ns *embedded.Server) *looks {
	t.Helper()
	nc := testnats.Connect(t, ns, "observer")
	sub, err := nc.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil { // the subscription is in place
		t.Fatal(err)
	}
	return &looks{t: t, nc: nc, sub: sub}
}

// awaitEmpty returns once a pull request sent after watchLooks was answered
// with a status and no message: the queue was found empty. It ends the
// watch.
func (l *looks) awaitEmpty(ctx context.Context) {
	l.t.Helper()
	defer l.nc.Close()
	requests := make(map[string]bool) // reply subjects of pull requests
	for {
		m, err := l.sub.NextMsgWithContext(ctx)
		if err != nil {
			l.t.Fatalf("no empty answer to a pull request: %v", err)
		}
		if strings.HasPrefix(m.Subject, "$JS.API.CONSUMER.MSG.NEXT.") {
			requests[m.Reply] = true
		} else if requests[m.Subject] && m.Header.Get("Status") != "" && len(m.Data) == 0 {
			return
		}
	}
}
