package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Issue 15 items 1, 2 and 6: bodies that declare more than they hold, read
// from a request or back from the stream, and batches that hold nothing.

// hostileCompounds are MessagePack bodies declaring arrays of up to 2^32-1
// elements in a few bytes. The first two killed the gateway with "out of
// memory" on a batch push, or on every pull of a message carrying them.
var hostileCompounds = []string{
	"\xdd\xff\xff\xff\xff\x92\x80\xa1x",
	"\x91\xdd\xff\xff\xff\xff\x80",
	"\xdd\x05\xf5\xe1\x00\x92\x80\xa1x", // 10^8 declared: 5 GiB before
	"\x91\x92\x80\xc6\xff\xff\xff\xffabc",
}

// expectAlive fails unless the gateway process is still running and serves a
// push and a pull of a fresh queue.
func expectAlive(t *testing.T, gw *Gateway, queue string) {
	t.Helper()
	if gw.proc == nil {
		t.Fatal("lmq-gateway is not running")
	}
	select {
	case <-gw.proc.exited:
		t.Fatalf("lmq-gateway exited (%v):\n%s", gw.proc.err, gw.Output())
	default:
	}
	c := gw.Client(t)
	c.Push(queue, []byte("still here"), "text/plain")
	c.ExpectReply(http.StatusNoContent, queue, c.MustPull(queue, "5", "still here").ID(), "ack")
}

// TestDecodeHostileBatch: each 9-byte body that used to kill the process is a
// 400 naming the problem, stores nothing, and the gateway keeps serving; a
// batch that holds no message is a 400 as well.
func TestDecodeHostileBatch(t *testing.T) {
	t.Parallel()
	gw, c := StartClient(t)
	const q = "decode/batch"
	for _, b := range hostileCompounds {
		r := c.Expect(http.StatusBadRequest, http.MethodPost, "/messages/"+Q(q)+"?batch=1", []byte(b),
			"Content-Type", mapping.ContentTypeMsgpack)
		if !strings.Contains(string(r.Body), "declared") {
			t.Errorf("% x: answer %s does not name the declared length", b, r.Body)
		}
		expectAlive(t, gw, "decode/alive")
	}
	for _, c2 := range []struct{ ctype, body, want string }{
		{"multipart/mixed; boundary=YY", "--XX\r\n\r\none\r\n--XX--\r\n", "boundary"},
		{"multipart/mixed; boundary=XX", "garbage", "boundary"},
		{"multipart/mixed; boundary=XX", "--XX--\r\n", "no message"},
		{mapping.ContentTypeMsgpack, "\x90", "no message"},
	} {
		r := c.Expect(http.StatusBadRequest, http.MethodPost, "/messages/"+Q(q)+"?batch=1", []byte(c2.body), "Content-Type", c2.ctype)
		if !strings.Contains(string(r.Body), c2.want) {
			t.Errorf("%s %q: answer %s does not mention %q", c2.ctype, c2.body, r.Body, c2.want)
		}
	}
	c.PullEmpty(q, "0")
	expectAlive(t, gw, "decode/alive")
}

// TestDecodeCrashLoopThroughNATS: a hostile compound body published straight
// on the queue's subject with Lmq-Kind: compound used to kill the gateway on
// the next pull, and again after every restart. Now it is delivered as a plain
// message with its body as stored, can be acked, and is gone; the same holds
// after a restart. Messages naming a large-message body that does not exist,
// and carrying out-of-range counts, are delivered too.
func TestDecodeCrashLoopThroughNATS(t *testing.T) {
	t.Parallel()
	gw, c := StartClient(t)
	const q = "decode/nats"
	n, err := mapping.NativeNames(q)
	if err != nil {
		t.Fatal(err)
	}
	c.PatchProps(q, `{}`) // creates the stream; the queue's retry is 2

	publish := func(body string, hdr ...string) {
		t.Helper()
		_, js := natsClient(t, gw)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m := nats.NewMsg(n.Subject)
		m.Data = []byte(body)
		for i := 0; i+1 < len(hdr); i += 2 {
			m.Header.Set(hdr[i], hdr[i+1])
		}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("publish to %s: %v", n.Subject, err)
		}
	}
	pullAck := func(body string) *Response {
		t.Helper()
		r := c.MustPull(q, "5", body)
		c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
		return r
	}

	for _, b := range hostileCompounds {
		publish(b, mapping.HdrKind, mapping.KindCompound)
		pullAck(b)
		expectAlive(t, gw, "decode/alive")
	}
	c.PullEmpty(q, "0")

	// Stored before a restart, pulled after it.
	publish(hostileCompounds[0], mapping.HdrKind, mapping.KindCompound)
	publish(hostileCompounds[1], mapping.HdrKind, mapping.KindCompound, mapping.HdrContentType, "application/x-msgpack")
	gw.Restart()
	pullAck(hostileCompounds[0])
	if r := pullAck(hostileCompounds[1]); r.Header.Get("Content-Type") != "application/x-msgpack" {
		t.Errorf("content-type %q, want the stored one", r.Header.Get("Content-Type"))
	}
	c.PullEmpty(q, "0")

	// A large-message body that is not stored: the message comes without it
	// rather than failing every pull.
	publish("", mapping.HdrObject, "no-such-object")
	pullAck("")
	// Counts beyond any the gateway writes read as absent: the queue's retry
	// applies (they used to wrap around and drop the message at once).
	publish("counts", mapping.HdrRetry, "9223372036854775807", mapping.HdrDelivered, "-9223372036854775808")
	if r := pullAck("counts"); r.Retry() != 2 {
		t.Errorf("retry-remaining %d, want the queue's 2", r.Retry())
	}
	c.PullEmpty(q, "0")
	gw.Restart()
	expectAlive(t, gw, "decode/alive")
}
