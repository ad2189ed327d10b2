package gateway_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// TestMoveMessage: a waiting message moves to another queue (created for
// it) with its body and content type, and is gone from its own; one in
// flight, one gone, an unknown queue and an unknown message are not found;
// moving to its own queue or with id 0 is invalid.
func TestMoveMessage(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	const q, target = "mv/src", "mv/dst"
	for _, b := range []string{"a", "b", "c"} {
		if _, err := g.Messages().Push(ctx, q, gateway.Message{ContentType: "text/x-" + b, Body: []byte(b)}); err != nil {
			t.Fatal(err)
		}
	}
	_, ids := listed(t, g, q)
	inFlight := mustPull(t, g, q, time.Second) // "a"
	if err := g.Inspect().MoveMessage(ctx, q, ids[0], target); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("move in flight: %v", err)
	}
	if err := g.Inspect().MoveMessage(ctx, q, ids[1], q); !errors.Is(err, gateway.ErrInvalid) {
		t.Fatalf("move to its own queue: %v", err)
	}
	if err := g.Inspect().MoveMessage(ctx, q, 0, target); !errors.Is(err, gateway.ErrInvalid) {
		t.Fatalf("move id 0: %v", err)
	}
	if err := g.Inspect().MoveMessage(ctx, "mv/none", ids[1], target); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("move on no queue: %v", err)
	}
	if err := g.Inspect().MoveMessage(ctx, q, ids[2]+100, target); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("move of no message: %v", err)
	}
	if err := g.Inspect().MoveMessage(ctx, q, ids[1], target); err != nil {
		t.Fatalf("move waiting: %v", err)
	}
	if err := g.Inspect().MoveMessage(ctx, q, ids[1], target); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("move twice: %v", err)
	}
	if bodies, _ := listed(t, g, q); fmt.Sprint(bodies) != "[c]" {
		t.Fatalf("source after the move: %v", bodies)
	}
	if bodies, _ := listed(t, g, target); fmt.Sprint(bodies) != "[b]" {
		t.Fatalf("target after the move: %v", bodies)
	}
	d := mustPull(t, g, target, time.Second)
	if string(d.Message.Body) != "b" || d.Message.ContentType != "text/x-b" {
		t.Fatalf("pulled from the target %q (%q)", d.Message.Body, d.Message.ContentType)
	}
	if err := g.Messages().Reply(ctx, q, inFlight.ID, gateway.Ack); err != nil {
		t.Fatalf("ack of the in-flight message: %v", err)
	}
	if d := mustPull(t, g, q, time.Second); string(d.Message.Body) != "c" {
		t.Fatalf("pulled %q, want c", d.Message.Body)
	}
	if d, err := g.Messages().Pull(ctx, q, 0); d != nil || err != nil {
		t.Fatalf("pulled %v, %v: the moved message came back", d, err)
	}
}

// TestMoveMessageLargeBody: a message whose body is in the Object Store
// arrives whole.
func TestMoveMessageLargeBody(t *testing.T) {
	t.Parallel()
	_, nc, g := startCoreConn(t)
	ctx := ctxT(t)
	const q, target = "mv/bigsrc", "mv/bigdst"
	big := bytes.Repeat([]byte("y"), int(nc.MaxPayload())+1)
	if _, err := g.Messages().Push(ctx, q, gateway.Message{Body: big}); err != nil {
		t.Fatal(err)
	}
	_, ids := listed(t, g, q)
	if err := g.Inspect().MoveMessage(ctx, q, ids[0], target); err != nil {
		t.Fatal(err)
	}
	if d := mustPull(t, g, target, time.Second); !bytes.Equal(d.Message.Body, big) {
		t.Fatalf("pulled %d bytes, want %d", len(d.Message.Body), len(big))
	}
}
