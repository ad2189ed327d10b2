package jsapi

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
)

// rawAnswer is the server's answer to m as package store's publishOnce
// receives it.
func rawAnswer(t *testing.T, nc *nats.Conn, m *nats.Msg) []byte {
	t.Helper()
	resp, err := nc.RequestMsgWithContext(testnats.Context(t), m)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Data
}

// TestPubAckServerForms: the forms a real nats-server writes on success (a
// new message, a duplicate Nats-Msg-Id) are read by the hand parser, not by
// the encoding/json fallback, and the same.
func TestPubAckServerForms(t *testing.T) {
	nc, js := testnats.Client(t, "puback")
	if _, err := js.CreateStream(testnats.Context(t), jetstream.StreamConfig{
		Name: "PA", Subjects: []string{"pa.>"}, Duplicates: time.Minute,
	}); err != nil {
		t.Fatal(err)
	}
	withID := func(id string) *nats.Msg {
		m := nats.NewMsg("pa.id")
		m.Header.Set(jetstream.MsgIDHeader, id)
		return m
	}
	for _, m := range []*nats.Msg{nats.NewMsg("pa.raw"), withID("one"), withID("one")} {
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
	if _, err := js.CreateStream(testnats.Context(t), jetstream.StreamConfig{Name: "PD", Subjects: []string{"pd"}}); err != nil {
		t.Fatal(err)
	}
	for want := uint64(1); want <= 2; want++ {
		raw := rawAnswer(t, nc, nats.NewMsg("pd"))
		if !strings.Contains(string(raw), `"domain":"dom"`) {
			t.Fatalf("answer without the domain: %s", raw)
		}
		if got, stream, ok := scanPubAck(raw); !ok || !stream || got != (PubAck{Seq: want}) {
			t.Fatalf("hand parser on %s: %+v stream %v ok %v", raw, got, stream, ok)
		}
		if got, err := ParsePubAck(raw); err != nil || got != (PubAck{Seq: want}) {
			t.Fatalf("ParsePubAck(%s): %+v %v", raw, got, err)
		}
	}
}

// pubAckForms are answers, odd and broken, with what they mean to nats.go.
var pubAckForms = []struct {
	in   string
	want PubAck
	err  error // nil, jetstream.ErrInvalidJSAck or an *APIError's text
	hand bool  // read by the hand parser
}{
	{`{"stream":"LMQS_05","seq":123}`, PubAck{Seq: 123}, nil, true},
	{`{"stream":"LMQS_05","seq":123,"duplicate": true}`, PubAck{Seq: 123, Duplicate: true}, nil, true},
	{`{"stream":"LMQS_05","domain":"hub","seq":7}`, PubAck{Seq: 7}, nil, true},
	{`{"seq":9,"duplicate":false,"domain":"","stream":"S"}`, PubAck{Seq: 9}, nil, true},
	{" \t\r\n{ \"seq\" : 5 ,\n\t\"stream\" :\"S\" } \n", PubAck{Seq: 5}, nil, true},
	{`{"stream":"S","seq":0}`, PubAck{}, nil, true},
	{`{"stream":"S","seq":18446744073709551615}`, PubAck{Seq: 1<<64 - 1}, nil, true},
	{`{"stream":"S~!#$%&'()*+,-./:;<=>?@[]^_{|}` + "\x7f" + `","seq":1}`, PubAck{Seq: 1}, nil, true},
	{`{}`, PubAck{}, jetstream.ErrInvalidJSAck, true},
	{`{"seq":3}`, PubAck{}, jetstream.ErrInvalidJSAck, true},
	{`{"stream":"","seq":3}`, PubAck{}, jetstream.ErrInvalidJSAck, true},
	{`{"domain":"d"}`, PubAck{}, jetstream.ErrInvalidJSAck, true},

	// For encoding/json: what it reads...
	{`{"stream":"S\u0041","seq":4}`, PubAck{Seq: 4}, nil, false},
	{`{"STREAM":"S","Seq":4}`, PubAck{Seq: 4}, nil, false},
	{`{"stream":"S","seq":1,"seq":2}`, PubAck{Seq: 2}, nil, false},
	{`{"stream":"S","seq":1,"val":"12"}`, PubAck{Seq: 1}, nil, false},
	{`{"stream":"S","seq":1,"batch":"b","count":2}`, PubAck{Seq: 1}, nil, false},
	{`{"type":"x","stream":"S","seq":1}`, PubAck{Seq: 1}, nil, false},
	{`{"stream":"S","seq":1,"duplicate":null}`, PubAck{Seq: 1}, nil, false},
	{`{"stream":"\u00e9","seq":1}`, PubAck{Seq: 1}, nil, false},
	{"{\"stream\":\"\xc3\xa9\",\"seq\":1}", PubAck{Seq: 1}, nil, false},
	{`{"error":{"code":503,"err_code":10039,"description":"jetstream not enabled"}}`, PubAck{},
		errors.New("nats: nats: API error: code=503 err_code=10039 description=jetstream not enabled"), false},
	{`{"error":{"code":400,"err_code":10060,"description":"expected stream does not match"},"stream":"PA","seq":0}`, PubAck{},
		errors.New("nats: nats: API error: code=400 err_code=10060 description=expected stream does not match"), false},
	// ...and what it refuses.
	{``, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{`null`, PubAck{}, jetstream.ErrInvalidJSAck, false}, // PubAck stays nil
	{`[]`, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{`, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":1`, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":1,}`, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":1}x`, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":1}{}`, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":-1}`, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":1.5}`, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":1e3}`, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":01}`, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":"1"}`, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":18446744073709551616}`, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":1,"duplicate":tru}`, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S","seq":1,"duplicate":truex}`, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":S,"seq":1}`, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{"{\"stream\":\"a\nb\",\"seq\":1}", PubAck{}, jetstream.ErrInvalidJSAck, false},
	{`{"stream":"S\x41","seq":1}`, PubAck{}, jetstream.ErrInvalidJSAck, false}, // a Go escape from %q
	{`{"stream":"S" "seq":1}`, PubAck{}, jetstream.ErrInvalidJSAck, false},
	{"\x00", PubAck{}, jetstream.ErrInvalidJSAck, false},
}

// TestParsePubAckForms: each answer means what it means to nats.go, and the
// hand parser takes exactly the forms it is meant to.
func TestParsePubAckForms(t *testing.T) {
	for _, c := range pubAckForms {
		got, err := ParsePubAck([]byte(c.in))
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
		if a := testing.AllocsPerRun(100, func() { _, _ = ParsePubAck(in) }); a != 0 {
			t.Errorf("%s: %v allocations", in, a)
		}
	}
}

// samePubAck tells whether two readings of an answer agree: the same ack, or
// the same error (by identity for nats.go's sentinels, by text otherwise).
func samePubAck(a PubAck, aerr error, b PubAck, berr error) bool {
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
		got, err := ParsePubAck(data)
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
		parse func([]byte) (PubAck, error)
	}{{"hand", ParsePubAck}, {"json", decodePubAck}} {
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
