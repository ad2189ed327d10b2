package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// pubAckCtx bounds a publishOnce test's requests; reached only on failure.
func pubAckCtx(t *testing.T) context.Context { return testnats.Context(t) }

// pubAckStream creates stream PA on subjects pa.> of a fresh embedded server
// and returns the connection and a JetStream handle on it.
func pubAckStream(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	ns := testnats.Start(t)
	nc := testnats.Connect(t, ns, "test")
	js := testnats.JetStream(t, nc)
	if _, err := js.CreateStream(pubAckCtx(t), jetstream.StreamConfig{
		Name: "PA", Subjects: []string{"pa.>"}, Duplicates: time.Minute,
	}); err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// TestPublishOnceRealAnswers: what publishOnce reads of a real
// nats-server's answers on success (a new message, a duplicate Nats-Msg-Id)
// means what it means to jetstream.PublishMsg. (jsapi's tests check that the
// hand parser, not the encoding/json fallback, reads these forms.)
func TestPublishOnceRealAnswers(t *testing.T) {
	nc, js := pubAckStream(t)
	ctx := pubAckCtx(t)
	s := &Store{nc: nc}

	for want := uint64(1); want <= 3; want++ {
		ack, err := s.publishOnce(ctx, msgOfNats(nats.NewMsg("pa.x")))
		if err != nil || ack != (jsapi.PubAck{Seq: want}) {
			t.Fatalf("publishOnce: %+v %v, want seq %d", ack, err, want)
		}
	}
	// No header at all: PublishMsg with an option gives the message an
	// empty one, and so does publishOnce.
	bare := &bus.Msg{Subject: "pa.bare"}
	if ack, err := s.publishOnce(ctx, bare); err != nil || ack.Seq != 4 || bare.Header == nil {
		t.Fatalf("publishOnce without header: %+v %v, header %v", ack, err, bare.Header)
	}

	withID := func(id string) *nats.Msg {
		m := nats.NewMsg("pa.id")
		m.Header.Set(jetstream.MsgIDHeader, id)
		return m
	}
	first, err := s.publishOnce(ctx, msgOfNats(withID("one")))
	if err != nil || first != (jsapi.PubAck{Seq: 5}) {
		t.Fatalf("first with Nats-Msg-Id: %+v %v", first, err)
	}
	again, err := s.publishOnce(ctx, msgOfNats(withID("one")))
	if err != nil || again != (jsapi.PubAck{Seq: 5, Duplicate: true}) {
		t.Fatalf("second with Nats-Msg-Id: %+v %v, want seq 5 duplicate", again, err)
	}
	ref, err := js.PublishMsg(ctx, withID("one"), jetstream.WithRetryAttempts(0))
	if err != nil || ref.Sequence != again.Seq || ref.Duplicate != again.Duplicate {
		t.Fatalf("PublishMsg of the duplicate: %+v %v, publishOnce %+v", ref, err, again)
	}

}

// TestPubAckErrorsAsPublishMsg: the errors Publish's retry loop and
// classification depend on come back as jetstream.PublishMsg gives them.
func TestPubAckErrorsAsPublishMsg(t *testing.T) {
	nc, js := pubAckStream(t)
	ctx := pubAckCtx(t)
	s := &Store{nc: nc}

	// No stream takes the subject: "no responders".
	_, err := s.publishOnce(ctx, msgOfNats(nats.NewMsg("nostream")))
	if !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("publish to no stream: %v, want ErrNoStreamResponse", err)
	}
	_, ref := js.PublishMsg(ctx, nats.NewMsg("nostream"), jetstream.WithRetryAttempts(0))
	if ref != err {
		t.Fatalf("publishOnce: %v; PublishMsg: %v", err, ref)
	}

	for _, c := range []struct {
		name  string
		msg   func() *nats.Msg
		code  jetstream.ErrorCode
		class error // what Outcome makes of it, if it classifies it
	}{
		{"expected stream mismatch", func() *nats.Msg {
			m := nats.NewMsg("pa.exp")
			m.Header.Set(jetstream.ExpectedStreamHeader, "OTHER")
			return m
		}, 10060, nil}, // JSStreamNotMatchErr
		{"headers over the limit", func() *nats.Msg {
			m := nats.NewMsg("pa.hdr")
			m.Header.Set("Lmq-Content-Type", strings.Repeat("a", 70<<10))
			return m
		}, jsErrHeaderTooLarge, ErrHeaderTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.publishOnce(ctx, msgOfNats(c.msg()))
			_, ref := js.PublishMsg(ctx, c.msg(), jetstream.WithRetryAttempts(0))
			var got, want *jetstream.APIError
			if !errors.As(err, &got) {
				t.Fatalf("publishOnce: %v (%T), want a *jetstream.APIError", err, err)
			}
			if !errors.As(ref, &want) {
				t.Fatalf("PublishMsg: %v (%T), want a *jetstream.APIError", ref, ref)
			}
			if *got != *want || got.ErrorCode != c.code || err.Error() != ref.Error() {
				t.Fatalf("publishOnce: %v %+v; PublishMsg: %v %+v; want err_code %d", err, *got, ref, *want, c.code)
			}
			if c.class != nil {
				if cls := Outcome("store message", err); !errors.Is(cls, c.class) {
					t.Fatalf("Outcome(%v) = %v, want %v", err, cls, c.class)
				}
			}
		})
	}
}

// msgOfNats is m as the seam's own message (the fields shared).
func msgOfNats(m *nats.Msg) *bus.Msg {
	return &bus.Msg{Subject: m.Subject, Reply: m.Reply, Header: bus.Headers(m.Header), Data: m.Data}
}
