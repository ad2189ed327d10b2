package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// pubAckCtx bounds a PubAck test's requests; reached only on failure.
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

// rawAnswer is the server's answer to m as publishOnce receives it.
func rawAnswer(t *testing.T, nc *nats.Conn, m *nats.Msg) []byte {
	t.Helper()
	resp, err := nc.RequestMsgWithContext(pubAckCtx(t), m)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Data
}

// TestPubAckRealAnswers: the forms a real nats-server writes on success (a
// new message, a duplicate Nats-Msg-Id) are read by the hand parser, not by
// the encoding/json fallback, and mean what they mean to jetstream.PublishMsg.
func TestPubAckRealAnswers(t *testing.T) {
	nc, js := pubAckStream(t)
	ctx := pubAckCtx(t)
	s := &Store{nc: nc}

	for want := uint64(1); want <= 3; want++ {
		ack, err := s.publishOnce(ctx, msgOfNats(nats.NewMsg("pa.x")))
		if err != nil || ack != (pubAck{seq: want}) {
			t.Fatalf("publishOnce: %+v %v, want seq %d", ack, err, want)
		}
	}
	// No header at all: PublishMsg with an option gives the message an
	// empty one, and so does publishOnce.
	bare := &bus.Msg{Subject: "pa.bare"}
	if ack, err := s.publishOnce(ctx, bare); err != nil || ack.seq != 4 || bare.Header == nil {
		t.Fatalf("publishOnce without header: %+v %v, header %v", ack, err, bare.Header)
	}

	withID := func(id string) *nats.Msg {
		m := nats.NewMsg("pa.id")
		m.Header.Set(jetstream.MsgIDHeader, id)
		return m
	}
	first, err := s.publishOnce(ctx, msgOfNats(withID("one")))
	if err != nil || first != (pubAck{seq: 5}) {
		t.Fatalf("first with Nats-Msg-Id: %+v %v", first, err)
	}
	again, err := s.publishOnce(ctx, msgOfNats(withID("one")))
	if err != nil || again != (pubAck{seq: 5, duplicate: true}) {
		t.Fatalf("second with Nats-Msg-Id: %+v %v, want seq 5 duplicate", again, err)
	}
	ref, err := js.PublishMsg(ctx, withID("one"), jetstream.WithRetryAttempts(0))
	if err != nil || ref.Sequence != again.seq || ref.Duplicate != again.duplicate {
		t.Fatalf("PublishMsg of the duplicate: %+v %v, publishOnce %+v", ref, err, again)
	}

	for _, m := range []*nats.Msg{nats.NewMsg("pa.raw"), withID("one")} {
		raw := rawAnswer(t, nc, m)
		got, stream, ok := scanPubAck(raw)
		if !ok || !stream {
			t.Errorf("hand parser does not read the server's %s", raw)
		}
		want, err := decodePubAck(raw)
		if err != nil || got != want {
			t.Errorf("%s: hand parser %+v, encoding/json %+v %v", raw, got, want, err)
		}
	}
}

// TestPubAckDomain: with a JetStream domain the server's PubAck names it; the
// hand parser reads that form too.
func TestPubAckDomain(t *testing.T) {
	s, err := server.NewServer(&server.Options{
		JetStream: true, JetStreamDomain: "dom", StoreDir: t.TempDir(),
		DontListen: true, NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect("", nats.InProcessServer(s))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.NewWithDomain(nc, "dom")
	if err != nil {
		t.Fatal(err)
	}
	ctx := pubAckCtx(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PD", Subjects: []string{"pd"}}); err != nil {
		t.Fatal(err)
	}
	raw := rawAnswer(t, nc, nats.NewMsg("pd"))
	if !strings.Contains(string(raw), `"domain":"dom"`) {
		t.Fatalf("answer without the domain: %s", raw)
	}
	if got, stream, ok := scanPubAck(raw); !ok || !stream || got != (pubAck{seq: 1}) {
		t.Fatalf("hand parser on %s: %+v stream %v ok %v", raw, got, stream, ok)
	}
	st := &Store{nc: nc}
	if ack, err := st.publishOnce(ctx, msgOfNats(nats.NewMsg("pd"))); err != nil || ack.seq != 2 {
		t.Fatalf("publishOnce: %+v %v", ack, err)
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

// pubAckForms are answers, odd and broken, with what they mean to nats.go.
var pubAckForms = []struct {
	in   string
	want pubAck
	err  error // nil, jetstream.ErrInvalidJSAck or an *APIError's text
	hand bool  // read by the hand parser
}{
	{`{"stream":"LMQS_05","seq":123}`, pubAck{seq: 123}, nil, true},
	{`{"stream":"LMQS_05","seq":123,"duplicate": true}`, pubAck{seq: 123, duplicate: true}, nil, true},
	{`{"stream":"LMQS_05","domain":"hub","seq":7}`, pubAck{seq: 7}, nil, true},
	{`{"seq":9,"duplicate":false,"domain":"","stream":"S"}`, pubAck{seq: 9}, nil, true},
	{" \t\r\n{ \"seq\" : 5 ,\n\t\"stream\" :\"S\" } \n", pubAck{seq: 5}, nil, true},
	{`{"stream":"S","seq":0}`, pubAck{}, nil, true},
	{`{"stream":"S","seq":18446744073709551615}`, pubAck{seq: 1<<64 - 1}, nil, true},
	{`{"stream":"S~!#$%&'()*+,-./:;<=>?@[]^_{|}` + "\x7f" + `","seq":1}`, pubAck{seq: 1}, nil, true},
	{`{}`, pubAck{}, jetstream.ErrInvalidJSAck, true},
	{`{"seq":3}`, pubAck{}, jetstream.ErrInvalidJSAck, true},
	{`{"stream":"","seq":3}`, pubAck{}, jetstream.ErrInvalidJSAck, true},
	{`{"domain":"d"}`, pubAck{}, jetstream.ErrInvalidJSAck, true},

	// For encoding/json: what it reads...
	{`{"stream":"S\u0041","seq":4}`, pubAck{seq: 4}, nil, false},
	{`{"STREAM":"S","Seq":4}`, pubAck{seq: 4}, nil, false},
	{`{"stream":"S","seq":1,"seq":2}`, pubAck{seq: 2}, nil, false},
	{`{"stream":"S","seq":1,"val":"12"}`, pubAck{seq: 1}, nil, false},
	{`{"stream":"S","seq":1,"batch":"b","count":2}`, pubAck{seq: 1}, nil, false},
	{`{"type":"x","stream":"S","seq":1}`, pubAck{seq: 1}, nil, false},
	{`{"stream":"S","seq":1,"duplicate":null}`, pubAck{seq: 1}, nil, false},
	{`{"stream":"\u00e9","seq":1}`, pubAck{seq: 1}, nil, false},
	{"{\"stream\":\"\xc3\xa9\",\"seq\":1}", pubAck{seq: 1}, nil, false},
	{`{"error":{"code":503,"err_code":10039,"description":"jetstream not enabled"}}`, pubAck{},
		errors.New("nats: nats: API error: code=503 err_code=10039 description=jetstream not enabled"), false},
	{`{"error":{"code":400,"err_code":10060,"description":"expected stream does not match"},"stream":"PA","seq":0}`, pubAck{},
		errors.New("nats: nats: API error: code=400 err_code=10060 description=expected stream does not match"), false},
	// ...and what it refuses.
	{``, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{`null`, pubAck{}, jetstream.ErrInvalidJSAck, false}, // PubAck stays nil
	{`[]`, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{`, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":1`, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":1,}`, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":1}x`, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":1}{}`, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":-1}`, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":1.5}`, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":1e3}`, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":01}`, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":"1"}`, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":18446744073709551616}`, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":1,"duplicate":tru}`, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":1,"duplicate":truex}`, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":S,"seq":1}`, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{"{\"stream\":\"a\nb\",\"seq\":1}", pubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S\x41","seq":1}`, pubAck{}, jetstream.ErrInvalidJSAck, false}, // a Go escape from %q
	{`{"stream":"S" "seq":1}`, pubAck{}, jetstream.ErrInvalidJSAck, false},
	{"\x00", pubAck{}, jetstream.ErrInvalidJSAck, false},
}

// TestParsePubAckForms: each answer means what it means to nats.go, and the
// hand parser takes exactly the forms it is meant to.
func TestParsePubAckForms(t *testing.T) {
	for _, c := range pubAckForms {
		got, err := parsePubAck([]byte(c.in))
		switch {
		case c.err == nil && (err != nil || got != c.want):
			t.Errorf("%q: %+v %v, want %+v", c.in, got, err, c.want)
		case errors.Is(c.err, jetstream.ErrInvalidJSAck) && err != jetstream.ErrInvalidJSAck:
			t.Errorf("%q: %+v %v, want ErrInvalidJSAck", c.in, got, err)
		case c.err != nil && !errors.Is(c.err, jetstream.ErrInvalidJSAck):
			var apiErr *jetstream.APIError
			if !errors.As(err, &apiErr) || err.Error() != c.err.Error() {
				t.Errorf("%q: %v (%T), want the APIError %v", c.in, err, err, c.err)
			}
		}
		ref, refErr := decodePubAck([]byte(c.in))
		if !samePubAck(got, err, ref, refErr) {
			t.Errorf("%q: %+v %v; encoding/json %+v %v", c.in, got, err, ref, refErr)
		}
		if _, _, hand := scanPubAck([]byte(c.in)); hand != c.hand {
			t.Errorf("%q: read by the hand parser %v, want %v", c.in, hand, c.hand)
		}
	}
}

// TestParsePubAckAllocs: the common answers are read without allocating.
func TestParsePubAckAllocs(t *testing.T) {
	for _, in := range [][]byte{
		[]byte(`{"stream":"LMQS_05","seq":123}`),
		[]byte(`{"stream":"LMQS_05","domain":"hub","seq":123,"duplicate": true}`),
	} {
		if a := testing.AllocsPerRun(100, func() { _, _ = parsePubAck(in) }); a != 0 {
			t.Errorf("%s: %v allocations", in, a)
		}
	}
}

// samePubAck tells whether two readings of an answer agree: the same ack, or
// the same error (by identity for nats.go's sentinels, by text otherwise).
func samePubAck(a pubAck, aerr error, b pubAck, berr error) bool {
	if aerr == nil || berr == nil {
		return aerr == nil && berr == nil && a == b
	}
	var ae, be *jetstream.APIError
	if errors.As(aerr, &ae) != errors.As(berr, &be) {
		return false
	}
	return aerr == berr || aerr.Error() == berr.Error()
}

// FuzzParsePubAck: whatever the hand parser reads, encoding/json (nats.go's
// reading) reads the same, and nothing panics.
func FuzzParsePubAck(f *testing.F) {
	for _, c := range pubAckForms {
		f.Add([]byte(c.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parsePubAck(data)
		ref, refErr := decodePubAck(data)
		if !samePubAck(got, err, ref, refErr) {
			t.Fatalf("%q: %+v %v; encoding/json %+v %v", data, got, err, ref, refErr)
		}
	})
}

// BenchmarkParsePubAck: the hand parser against nats.go's encoding/json
// reading, on the answer a push gets.
func BenchmarkParsePubAck(b *testing.B) {
	in := []byte(`{"stream":"LMQS_05","seq":1234567}`)
	for _, c := range []struct {
		name  string
		parse func([]byte) (pubAck, error)
	}{{"hand", parsePubAck}, {"json", decodePubAck}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.parse(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// msgOfNats is m as the store's own message (the fields shared).
func msgOfNats(m *nats.Msg) *bus.Msg {
	return &bus.Msg{Subject: m.Subject, Reply: m.Reply, Header: bus.Headers(m.Header), Data: m.Data}
}
