package gateway_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Headers the gateway stores with a message are bounded, each and together;
// beyond that a push fails with ErrHeaderTooLarge before JetStream is asked,
// and nothing is stored. Durations beyond mapping.MaxDuration are refused.
func TestPushLimits(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := ctxT(t)
	big := strings.Repeat("a", mapping.MaxHeaderValue+1)
	for _, msg := range []gateway.Message{
		{ContentType: big, Body: []byte("x")},
		{ContentType: "text/plain", Kept: []gateway.Header{{Name: "x-id", Value: big}}},
		{Kept: []gateway.Header{
			{Name: "x-a", Value: strings.Repeat("a", 3100)},
			{Name: "x-b", Value: strings.Repeat("b", 3100)},
		}},
	} {
		if _, err := g.Messages().Push(ctx, "lim", msg); !errors.Is(err, gateway.ErrHeaderTooLarge) {
			t.Errorf("push with %d bytes of content-type and %d kept headers: %v, want ErrHeaderTooLarge",
				len(msg.ContentType), len(msg.Kept), err)
		}
	}
	err := g.Messages().PushBatch(ctx, "lim", []gateway.Message{{Body: []byte("ok")}, {ContentType: big}})
	if !errors.Is(err, gateway.ErrInvalid) || errors.Is(err, gateway.ErrHeaderTooLarge) {
		t.Errorf("batch with a large part content-type: %v, want ErrInvalid (the header came in the body)", err)
	}
	for _, opts := range []gateway.PushOptions{
		{Delay: mapping.MaxDuration + 1},
		{TTL: mapping.MaxDuration + 1},
	} {
		if _, err := g.Messages().PushWith(ctx, "lim", gateway.Message{Body: []byte("x")}, opts); !errors.Is(err, gateway.ErrInvalid) {
			t.Errorf("push with %+v: %v, want ErrInvalid", opts, err)
		}
	}
	if d, err := g.Messages().Pull(ctx, "lim", 0); err != nil || d != nil {
		t.Fatalf("refused pushes stored something: %+v, %v", d, err)
	}

	// At the limits: stored and delivered as given.
	ct := strings.Repeat("c", mapping.MaxHeaderValue)
	if _, err := g.Messages().PushWith(ctx, "lim", gateway.Message{ContentType: ct, Body: []byte("edge")},
		gateway.PushOptions{TTL: mapping.MaxDuration}); err != nil {
		t.Fatal(err)
	}
	d := mustPull(t, g, "lim", 0)
	if d.Message.ContentType != ct || string(d.Message.Body) != "edge" {
		t.Fatalf("pulled %d bytes of content-type, body %q", len(d.Message.ContentType), d.Message.Body)
	}
}
