package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// newCore starts an embedded nats-server in a temp dir and a core on it.
func newCore(t *testing.T) *gateway.Gateway {
	t.Helper()
	ns, err := embedded.Start(embedded.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(context.Background()) })
	nc, err := ns.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := gateway.New(ctx, nc, gateway.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPushPullAck(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	if st, err := g.Push(ctx, "q", gateway.Message{ContentType: "text/plain", Body: []byte("hello")}); err != nil || st != gateway.AccumNo {
		t.Fatalf("push: %v %v", st, err)
	}
	d, err := g.Pull(ctx, "q", time.Second)
	if err != nil || d == nil {
		t.Fatalf("pull: %v %v", d, err)
	}
	if string(d.Message.Body) != "hello" || d.Message.ContentType != "text/plain" || d.RetryRemaining != 2 {
		t.Fatalf("got %+v", d)
	}
	if err := g.Reply(ctx, "q", d.ID, gateway.Ack); err != nil {
		t.Fatal(err)
	}
	if err := g.Reply(ctx, "q", d.ID, gateway.Ack); err == nil {
		t.Fatal("second ack accepted")
	}
	if d, err := g.Pull(ctx, "q", 0); d != nil || err != nil {
		t.Fatalf("queue not empty after ack: %v %v", d, err)
	}
}
