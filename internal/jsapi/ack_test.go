package jsapi

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// TestParseAck: ParseAck reads every form of ack subject as nats.go's
// Msg.Metadata does (the one it replaces on the pull path), and refuses
// what Metadata refuses.
func TestParseAck(t *testing.T) {
	t.Parallel()
	for _, reply := range []string{
		// An older server's 9 tokens.
		"$JS.ACK.LMQS_03.c.1.42.7.1700000000123456789.0",
		// Domain and account hash, 12 tokens.
		"$JS.ACK._.ACCHASH.LMQS_03.c.3.42.7.1700000000123456789.5.rand",
		"$JS.ACK.hub.ACCHASH.LMQS_03.c.2.18446744073709551615.7.1.5.rand",
		// 11 tokens (the last one may go away), and more than 12.
		"$JS.ACK.hub.ACCHASH.S.c.1.9.7.1700000000000000000.0",
		"$JS.ACK.hub.ACCHASH.S.c.1.9.7.1700000000000000000.0.a.b",
		// Tokens that are not numbers read as 0.
		"$JS.ACK.S.c.x.9.7.-1.0",
		"$JS.ACK.S.c.1.٣.7.5.0",
		// Not ack subjects.
		"$JS.ACK.S.c.1.9.7.5",
		"$JS.ACK.a.b.S.c.1.9.7.5.0",
		"$JS.ACKX.S.c.1.9.7.5.0",
		"_INBOX.abc.1",
		"",
	} {
		got, ok := ParseAck(reply)
		md, err := (&nats.Msg{Reply: reply, Sub: &nats.Subscription{}}).Metadata()
		if ok != (err == nil) {
			t.Errorf("%q: ParseAck ok %v, Metadata error %v", reply, ok, err)
			continue
		}
		if !ok {
			continue
		}
		want := AckFacts{Seq: md.Sequence.Stream, Delivered: md.NumDelivered, Stored: md.Timestamp.UnixNano()}
		if got != want {
			t.Errorf("%q: ParseAck %+v, Metadata %+v", reply, got, want)
		}
	}
}

// TestParseAckAllocates nothing: it runs once per pulled message.
func TestParseAckAllocates(t *testing.T) {
	reply := "$JS.ACK._.ACCHASH.LMQS_03.c.3.42.7.1700000000123456789.5.rand"
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseAck(reply) }); n != 0 {
		t.Fatalf("ParseAck allocates %v times", n)
	}
}
