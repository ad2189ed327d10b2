package gateway

import (
	"errors"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
)

// SetVisibility through the gateway that holds the delivery and through
// another: 0 gives the message back at once without using a retry; a
// longer time keeps it past the queue's timeout; an unknown id is not found.
func TestSetVisibility(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	a, b := gatewayOn(t, ns, "a"), gatewayOn(t, ns, "b")
	ctx := prioCtx(t)
	setProps(t, a, "vis", `{"timeout":1,"retry":1}`)
	pushP(t, a, "vis", "m", -1)
	d, err := a.Messages().Pull(ctx, "vis", msgWait)
	if err != nil || d == nil || d.Receives != 1 || d.PushedAt.IsZero() || d.Seq == 0 {
		t.Fatalf("pull: %+v, %v", d, err)
	}
	// Visible again at once, through the other gateway, without a retry.
	if err := b.Messages().SetVisibility(ctx, "vis", d.ID, 0); err != nil {
		t.Fatal(err)
	}
	d2, err := a.Messages().Pull(ctx, "vis", msgWait)
	if err != nil || d2 == nil {
		t.Fatalf("pull after visibility 0: %v, %v", d2, err)
	}
	if d2.RetryRemaining != d.RetryRemaining || d2.Receives != d.Receives+1 {
		t.Fatalf("visibility 0: %+v after %+v; want the same retries left, one receive more", d2, d)
	}
	// Kept well past the queue's 1 s timeout.
	if err := a.Messages().SetVisibility(ctx, "vis", d2.ID, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Messages().Pull(ctx, "vis", 2500*time.Millisecond); err != nil || got != nil {
		t.Fatalf("a message whose visibility was extended came back: %+v, %v", got, err)
	}
	if err := a.Messages().Reply(ctx, "vis", d2.ID, Ack); err != nil {
		t.Fatalf("ack after extension: %v", err)
	}
	if err := a.Messages().SetVisibility(ctx, "vis", d2.ID, time.Second); !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrAlreadyAcked) {
		t.Fatalf("visibility of an acked delivery: %v", err)
	}
	if err := a.Messages().SetVisibility(ctx, "vis", d2.ID, -time.Second); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative visibility: %v", err)
	}
}

// A released message keeps when it was first handed out, and its receive
// count grows with each delivery.
func TestFirstReceivedKept(t *testing.T) {
	ns := testnats.Start(t)
	g := gatewayOn(t, ns, "a")
	ctx := prioCtx(t)
	setProps(t, g, "fr", `{"retry":5}`)
	pushP(t, g, "fr", "m", -1)
	d, err := g.Messages().Pull(ctx, "fr", msgWait)
	if err != nil || d == nil {
		t.Fatal(d, err)
	}
	if err := g.Messages().Reply(ctx, "fr", d.ID, Nack); err != nil {
		t.Fatal(err)
	}
	d2, err := g.Messages().Pull(ctx, "fr", msgWait)
	if err != nil || d2 == nil {
		t.Fatal(d2, err)
	}
	if d2.Receives != 2 || !d2.FirstReceivedAt.Equal(d.FirstReceivedAt) {
		t.Fatalf("second delivery: receives %d first %v; want 2 and %v", d2.Receives, d2.FirstReceivedAt, d.FirstReceivedAt)
	}
}
