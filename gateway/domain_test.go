package gateway_test

import (
	"context"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// startNATS starts an in-process nats-server on loopback.
func startNATS(t *testing.T, o *server.Options) *server.Server {
	t.Helper()
	o.Host, o.Port, o.NoLog, o.NoSigs = "127.0.0.1", -1, true, true
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// exercise runs a core through push, pull, nack (a release: publish and ack
// subject), ack, a delayed push, and pull-any over a queue created after
// start (stream listing and advisories).
func exercise(t *testing.T, g *gateway.Gateway) {
	t.Helper()
	ctx := ctxT(t)
	mustPush(t, g, "dq", "one")
	d := mustPull(t, g, "dq", 5*time.Second)
	if string(d.Message.Body) != "one" {
		t.Fatalf("pulled %q", d.Message.Body)
	}
	if err := g.Messages().Reply(ctx, "dq", d.ID, gateway.Nack); err != nil {
		t.Fatalf("nack: %v", err)
	}
	d = mustPull(t, g, "dq", 5*time.Second)
	if string(d.Message.Body) != "one" || d.RetryRemaining != 1 {
		t.Fatalf("after nack: %q retry %d", d.Message.Body, d.RetryRemaining)
	}
	if err := g.Messages().Reply(ctx, "dq", d.ID, gateway.Ack); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if d, err := g.Messages().Pull(ctx, "dq", 0); d != nil || err != nil {
		t.Fatalf("queue not empty after ack: %+v %v", d, err)
	}
	if _, err := g.Messages().PushWith(ctx, "dq", gateway.Message{Body: []byte("later")}, gateway.PushOptions{Delay: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if d := mustPull(t, g, "dq", 10*time.Second); string(d.Message.Body) != "later" {
		t.Fatalf("delayed: %q", d.Message.Body)
	}
	got := waitingPull(t, g, "", func() *gateway.Delivery {
		d, _ := g.Messages().PullAny(ctx, regexp.MustCompile(`^fresh`), 15*time.Second, nil)
		return d
	})
	mustPush(t, g, "fresh", "f")
	if d := <-got; d == nil || d.Queue != "fresh" {
		t.Fatalf("pull-any: %+v", d)
	}
}

// TestJetStreamDomain: with Config.Domain every JetStream request of the core,
// its own pull requests included, goes to $JS.<domain>.API.
func TestJetStreamDomain(t *testing.T) {
	t.Parallel()
	s := startNATS(t, &server.Options{JetStream: true, JetStreamDomain: "dom", StoreDir: t.TempDir()})
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// A domain that does not exist has no responders: New fails.
	nctx, cancel := context.WithTimeout(ctxT(t), 2*time.Second)
	defer cancel()
	if g, err := gateway.New(nctx, bus.New(nc), gateway.Config{Domain: "elsewhere"}); err == nil {
		g.Close()
		t.Fatal("core started on a JetStream domain that does not exist")
	}
	g, err := gateway.New(ctxT(t), bus.New(nc), gateway.Config{Domain: "dom"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	exercise(t, g)
}

// TestLeafNodeDomain: a gateway connected to a leaf node without JetStream
// keeps its queues in the hub's JetStream, named by the hub's domain.
func TestLeafNodeDomain(t *testing.T) {
	t.Parallel()
	hub := startNATS(t, &server.Options{
		ServerName: "hub", JetStream: true, JetStreamDomain: "hub", StoreDir: t.TempDir(),
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: -1},
	})
	vz, err := hub.Varz(nil)
	if err != nil {
		t.Fatal(err)
	}
	leafURL := &url.URL{Scheme: "nats", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(vz.LeafNode.Port))}
	leaf := startNATS(t, &server.Options{
		ServerName: "leaf",
		LeafNode:   server.LeafNodeOpts{Remotes: []*server.RemoteLeafOpts{{URLs: []*url.URL{leafURL}}}},
	})
	testwait.For(t, "leaf.NumLeafNodes() > 0 && hub.NumLeafNodes() > 0", func() bool { return leaf.NumLeafNodes() > 0 && hub.NumLeafNodes() > 0 })
	nc, err := nats.Connect(leaf.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// The leaf connection is up before the hub's interest in its JetStream
	// API has crossed it: until then a request answers "no responders"
	// (seen beside two CPU hogs). Wait until the hub's JetStream answers
	// through the leaf, as an operator would before starting a gateway.
	js, err := jetstream.NewWithDomain(nc, "hub")
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the hub's JetStream answering through the leaf", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	g, err := gateway.New(ctxT(t), bus.New(nc), gateway.Config{Domain: "hub"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	exercise(t, g)
}
