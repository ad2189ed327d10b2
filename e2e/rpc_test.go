package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// The MessagePack-RPC front end (issue 3), against the real binary over TCP,
// with the client of rpcclient_test.go. Every answer read through that
// client is also checked to be in LMQ's raw dialect (no str8, no bin).

// TestRPCClientCodec checks the test's own MessagePack code against an
// independent implementation (vmihailenco/msgpack), so that the tests below
// do not rest on a client that is wrong in the same way as the server.
func TestRPCClientCodec(t *testing.T) {
	t.Parallel()
	vals := []any{
		nil, true, false, int64(0), int64(127), int64(128), int64(-32), int64(-33), int64(-129),
		int64(70000), int64(-70000), int64(1) << 40, int64(-1) << 40, uint64(1)<<63 + 5,
		1.5, "", "short", strings.Repeat("s", 100), strings.Repeat("l", 70000),
		[]any{}, []any{int64(1), "two", nil, []any{int64(3)}}, make([]any, 20),
		map[string]any{}, map[string]any{"a": map[string]any{"b": []any{"c"}}},
	}
	for _, current := range []bool{false, true} {
		e := mpEncoder{current: current}
		for _, v := range vals {
			b := e.encode(nil, v)
			var theirs any
			if err := msgpack.Unmarshal(b, &theirs); err != nil {
				t.Fatalf("current=%v: vmihailenco cannot read our %#v: %v", current, v, err)
			}
			ours, formats, err := mpDecode(b)
			if err != nil {
				t.Fatalf("current=%v: decode our %#v: %v", current, v, err)
			}
			if !reflect.DeepEqual(mpNormalize(ours), mpNormalize(v)) || !reflect.DeepEqual(mpNormalize(theirs), mpNormalize(v)) {
				t.Errorf("current=%v: %#v came back as %#v (ours) and %#v (vmihailenco)", current, v, ours, theirs)
			}
			if !current && mpNewDialect(formats) {
				t.Errorf("raw encoding of %#v uses str8/bin: % x", v, b[:min(len(b), 16)])
			}
		}
	}
	// And bin, which only their encoder writes here.
	b, err := msgpack.Marshal([]byte{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	v, formats, err := mpDecode(b)
	if err != nil || !bytes.Equal(v.([]byte), []byte{1, 2, 3}) || !mpNewDialect(formats) {
		t.Fatalf("bin: %#v %x %v", v, formats, err)
	}
}

// TestRPCMethods calls every method of the spec's table once or more and
// checks LMQ's result shapes.
func TestRPCMethods(t *testing.T) {
	t.Parallel()
	gw, c := rpcStartDialed(t)

	t.Run("push pull release retain done", func(t *testing.T) {
		c := c.For(t)
		const q = "m/basic"
		c.MustOK("push", q, "hello")
		m := c.MustPull("pull", q) // without a timeout: a message is waiting
		if m.Queue != q || m.Type != "normal" || m.Retry != 2 || m.Content != "hello" {
			t.Fatalf("first delivery %+v, want queue %q, normal, retry 2, content hello", m, q)
		}
		c.MustOK("release", q, m.ID) // nack: back at once, one retry used
		m2 := c.MustPull("pull", q, 5)
		if m2.ID == m.ID || m2.Retry != 1 || m2.Content != "hello" {
			t.Fatalf("after release %+v, want a new id and retry 1", m2)
		}
		if e := c.MustFail("done", q, m.ID); e == "" {
			t.Fatal("done with the id of an earlier delivery: empty error string")
		}
		c.MustOK("retain", q, m2.ID)
		c.MustOK("done", q, m2.ID)
		c.MustFail("done", q, m2.ID)
		c.MustFail("retain", q, m2.ID)
		c.MustFail("release", q, m2.ID)
		c.MustEmpty("pull", q, 0)
	})

	t.Run("retain restarts the timer", func(t *testing.T) {
		c := c.For(t)
		const q = "m/retain"
		c.MustOK("update_props", q, map[string]any{"timeout": 3})
		c.MustOK("push", q, "x")
		m := c.MustPull("pull", q, 5)
		pulled := time.Now()
		sleepUntil(pulled.Add(1500 * time.Millisecond))
		retained := time.Now()
		c.MustOK("retain", q, m.ID)
		// Past the first timeout (3 s after the pull), before the new one
		// (3 s after the retain). A machine so slow that the retain came
		// late may be past the new one too: then nothing is left to check.
		sleepUntil(pulled.Add(3300 * time.Millisecond))
		if time.Since(retained) > 2500*time.Millisecond {
			t.Skipf("retain sent %v after the pull: no moment between the two timeouts to look at", retained.Sub(pulled))
		}
		c.MustEmpty("pull", q, 0) // not redelivered
		c.MustOK("done", q, m.ID) // same id still valid
	})

	t.Run("pull timeout", func(t *testing.T) {
		c := c.For(t)
		const q = "m/empty"
		start := time.Now()
		c.MustEmpty("pull", q, 0.3)
		if el := time.Since(start); el < 300*time.Millisecond {
			t.Errorf("pull with timeout 0.3 answered empty after %v", el)
		}
		// Integer timeout, no wait (a wait would be forever, beyond the
		// client's timeout).
		c.MustEmpty("pull", q, 0)
	})

	t.Run("push_all pull_any", func(t *testing.T) {
		c := c.For(t)
		for _, q := range []string{"m/pa/1", "m/pa/2"} {
			c.MustEmpty("pull", q, 0) // creates the queue
		}
		c.MustOK("push_all", "^m/pa/", "to all")
		got := map[string]bool{}
		for range 2 {
			m := c.MustPull("pull_any", "^m/pa/", 5)
			if m.Content != "to all" || got[m.Queue] || !strings.HasPrefix(m.Queue, "m/pa/") {
				t.Fatalf("pull_any got %+v (seen %v)", m, got)
			}
			got[m.Queue] = true
			c.MustOK("done", m.Queue, m.ID)
		}
		c.MustEmpty("pull_any", "^m/pa/", 0)
		c.MustEmpty("pull_any", "^m/pa/", 0.2)
	})

	t.Run("delete", func(t *testing.T) {
		c, hc := c.For(t), gw.Client(t)
		const q = "m/del"
		c.MustOK("push", q, "gone soon")
		if !rpcQueueExists(t, hc, q) {
			t.Fatalf("queue %q does not exist after a push", q)
		}
		c.MustOK("delete", q)
		if rpcQueueExists(t, hc, q) {
			t.Fatalf("queue %q still exists after delete", q)
		}
		c.MustEmpty("pull", q, 0) // its message went with it
		// LMQ answered ok whether or not the queue existed.
		c.MustOK("delete", "m/never-existed")
	})

	t.Run("update_props", func(t *testing.T) {
		c, hc := c.For(t), gw.Client(t)
		const q = "m/props"
		c.MustOK("update_props", q, map[string]any{"retry": 5, "timeout": 1.5})
		rpcExpectProps(t, hc, q, `{"accum":0,"retry":5,"timeout":1.5}`)
		c.MustOK("update_props", q, map[string]any{"pack": 0.5}) // LMQ's old name
		rpcExpectProps(t, hc, q, `{"accum":0.5,"retry":5,"timeout":1.5}`)
		c.MustOK("update_props", q, map[string]any{"accum": 0.25})
		rpcExpectProps(t, hc, q, `{"accum":0.25,"retry":5,"timeout":1.5}`)
		c.MustOK("update_props", q) // without props: back to the defaults
		rpcExpectProps(t, hc, q, `{"accum":0,"retry":2,"timeout":30}`)
	})

	t.Run("default props", func(t *testing.T) {
		c, hc := c.For(t), gw.Client(t)
		// The default list is global: this subtest runs alone, and clears it.
		defer c.MustOK("set_default_props", []any{})
		c.MustOK("set_default_props", []any{
			[]any{"^m/dp/", map[string]any{"accum": 0.5, "retry": 1}},
			[]any{"^m/dp2/", map[string]any{"pack": 2}},
		})
		got := c.Must("get_default_props")
		want := []any{
			[]any{"^m/dp/", map[string]any{"pack": 0.5, "retry": 1}},
			[]any{"^m/dp2/", map[string]any{"pack": 2}},
		}
		if !reflect.DeepEqual(mpLoose(got), mpLoose(want)) {
			t.Fatalf("get_default_props = %#v, want %#v (accum reported as pack)", mpNormalize(got), want)
		}
		rpcExpectProps(t, hc, "m/dp/x", `{"accum":0.5,"retry":1,"timeout":30}`)
		rpcExpectProps(t, hc, "m/dp2/x", `{"accum":2,"retry":2,"timeout":30}`)
		r := hc.Expect(http.StatusOK, http.MethodGet, "/properties", nil)
		var list []any
		if err := json.Unmarshal(r.Body, &list); err != nil || len(list) != 2 {
			t.Fatalf("GET /properties after set_default_props: %s (%v)", r.Body, err)
		}
		c.MustOK("set_default_props", []any{})
		if got := c.Must("get_default_props"); !reflect.DeepEqual(got, []any{}) {
			t.Fatalf("get_default_props after clearing = %#v, want []", got)
		}
	})

	t.Run("create", func(t *testing.T) {
		c := c.For(t)
		// Removed in LMQ 0.4: an error, and the connection goes on.
		c.MustFail("create", "m/created")
		c.MustFail("create", "m/created", map[string]any{"retry": 1})
		c.MustEmpty("pull", "m/basic", 0)
	})
}

// TestRPCContent checks the content rules across the two protocols.
func TestRPCContent(t *testing.T) {
	t.Parallel()
	gw, c := rpcStartDialed(t)

	nested := map[string]any{
		"str":    "hello",
		"str8":   strings.Repeat("s", 100), // str8 in the 2013 dialect, raw16 in LMQ's
		"long":   strings.Repeat("l", 70000),
		"utf8":   "héllo ✓",
		"int":    42,
		"neg":    -7,
		"negbig": -100000,
		"big":    int64(1) << 40,
		"u64":    uint64(1)<<63 + 5,
		"float":  3.25,
		"arr":    []any{1, "two", nil, true, 2.5, []any{}},
		"nested": map[string]any{"a": map[string]any{"b": []any{map[string]any{}}}},
		"bin":    []byte{0, 1, 2, 0xff},
		"nil":    nil,
		"t":      true,
		"f":      false,
	}
	contents := []any{nested, nil, 42, -1, 1.5, "plain", []byte{0xde, 0xad, 0xbe, 0xef}, []any{}, map[string]any{}}

	// Encoded by an independent encoder, in the 2013 dialect (str8, bin):
	// the server must read it and answer the same object in LMQ's dialect.
	encode := func(v any) []byte {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		enc.SetSortMapKeys(true)
		if err := enc.Encode(v); err != nil {
			t.Fatalf("encode %#v: %v", v, err)
		}
		return buf.Bytes()
	}

	t.Run("rpc to rpc", func(t *testing.T) {
		c := c.For(t)
		const q = "c/rt"
		for _, v := range contents {
			c.MustOK("push", q, mpRaw(encode(v)))
		}
		for i, v := range contents {
			m := c.MustPull("pull", q, 5)
			if got, want := mpNormalize(m.Content), mpNormalize(v); !reflect.DeepEqual(got, want) {
				t.Errorf("content %d came back as %s, want %s", i, rpcShort(got), rpcShort(want))
			}
			c.MustOK("done", q, m.ID)
		}
	})

	t.Run("rpc to http", func(t *testing.T) {
		c, hc := c.For(t), gw.Client(t)
		const q = "c/to-http"
		for _, v := range []any{nested, "plain", nil} {
			b := encode(v)
			c.MustOK("push", q, mpRaw(b))
			r := hc.Pull(q, "5")
			if r.Status != http.StatusOK || !bytes.Equal(r.Body, b) {
				t.Fatalf("HTTP pull of RPC content %s: %v, want the MessagePack bytes % x", rpcShort(v), r, b[:min(len(b), 32)])
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/x-msgpack" {
				t.Errorf("content-type %q, want application/x-msgpack", ct)
			}
			if r.Header.Get(hQueue) != q || r.Header.Get(hType) != "normal" {
				t.Errorf("headers %v", r.Header)
			}
			hc.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
		}
	})

	t.Run("http to rpc", func(t *testing.T) {
		c, hc := c.For(t), gw.Client(t)
		const q = "c/from-http"
		bodies := []struct {
			body []byte
			ct   string
		}{
			{[]byte("hello"), "text/plain"},
			{[]byte{0x00, 0xff, 0xc1, 0xd9, 0x93, 'x'}, "application/octet-stream"}, // not MessagePack
			{bytes.Repeat([]byte{0xab}, 40), ""},                                    // raw16 in LMQ's dialect
			{[]byte{0x92, 0x01, 0x02}, "application/json"},                          // looks like MessagePack, is not labelled so
		}
		for _, b := range bodies {
			hc.Push(q, b.body, b.ct)
		}
		for _, b := range bodies {
			r := c.Do("pull", q, 5)
			m, err := rpcPulled(r.Result)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := mpString(m.Content); !ok || got != string(b.body) {
				t.Errorf("HTTP body % x (%s) came over RPC as %#v, want the raw bytes", b.body, b.ct, m.Content)
			}
			// The content is the last object of the answer: a raw string.
			if f := r.Formats[len(r.Formats)-1]; f&0xe0 != 0xa0 && f != 0xda && f != 0xdb {
				t.Errorf("content format byte 0x%02x, want raw (fixstr, str16, str32)", f)
			}
			c.MustOK("done", q, m.ID)
		}
	})
}

// TestRPCDialect writes hand-built frames in both dialects and compares the
// answers byte for byte; then does the same against a gateway answering in
// the current dialect (--rpc-dialect current).
func TestRPCDialect(t *testing.T) {
	t.Parallel()
	hc, nc, dec := rawRPCGateway(t)

	long := strings.Repeat("q", 40) // str8 in the 2013 dialect, raw16 in LMQ's

	// [0, 1, "push", ["dialect", "hi"]], all raw.
	rpcRoundTrip(t, nc, dec,
		cat("\x94\x00\x01\xa4push\x92\xa7dialect\xa2hi"),
		cat("\x94\x01\x01\xc0\xa2ok"))
	// [0, 2, "push", [<40-char name>, bin 00 01 02]], method and name as str8.
	rpcRoundTrip(t, nc, dec,
		cat("\x94\x00\x02\xd9\x04push\x92\xd9\x28", long, "\xc4\x03\x00\x01\x02"),
		cat("\x94\x01\x02\xc0\xa2ok"))
	// str16 and str32 headers for short strings are read too.
	rpcRoundTrip(t, nc, dec,
		cat("\x94\x00\x03\xda\x00\x04push\x92\xdb\x00\x00\x00\x07dialect\xc5\x00\x01Z"),
		cat("\x94\x01\x03\xc0\xa2ok"))

	// Pull them back: the whole answer, byte for byte, with the delivery id
	// (36 characters: raw16, never str8) taken from the answer itself.
	pull := func(msgid byte, nameHdr, name, content string) {
		t.Helper()
		req := cat("\x94\x00", string(msgid), "\xa4pull\x92", nameHdr, name, "\x05")
		got := rpcExchange(t, nc, dec, req)
		id := rpcIDOf(t, got)
		want := cat("\x94\x01", string(msgid), "\xc0\x85",
			"\xa5queue", nameHdr, name,
			"\xa2id\xda\x00\x24", id,
			"\xa4type\xa6normal",
			"\xa5retry\x02",
			"\xa7content", content)
		if !bytes.Equal(got, want) {
			t.Errorf("pull %q answer\n got % x\nwant % x", name, got, want)
		}
	}
	pull(4, "\xa7", "dialect", "\xa2hi")
	pull(5, "\xa7", "dialect", "\xa1Z")               // bin pushed, raw answered
	pull(6, "\xda\x00\x28", long, "\xa3\x00\x01\x02") // name answered as raw16, bin as raw

	// HTTP content over RPC is raw bytes, as raw.
	hc.Push("dialect/http", bytes.Repeat([]byte{'b'}, 40), "")
	pull(7, "\xac", "dialect/http", "\xda\x00\x28"+strings.Repeat("b", 40))

	t.Run("current", func(t *testing.T) {
		hc, nc, dec := rawRPCGateway(t, "--rpc-dialect", "current")
		// Requests in either dialect are still read.
		rpcRoundTrip(t, nc, dec,
			cat("\x94\x00\x01\xa4push\x92\xa7dialect\xa2hi"),
			cat("\x94\x01\x01\xc0\xa2ok"))
		rpcRoundTrip(t, nc, dec,
			cat("\x94\x00\x02\xd9\x04push\x92\xa7dialect\xc4\x03\x00\x01\x02"),
			cat("\x94\x01\x02\xc0\xa2ok"))
		hc.Push("dialect", bytes.Repeat([]byte{'b'}, 40), "")

		pullCur := func(msgid byte, content string) {
			t.Helper()
			got := rpcExchange(t, nc, dec, cat("\x94\x00", string(msgid), "\xa4pull\x92\xa7dialect\x05"))
			id := rpcIDOf(t, got)
			want := cat("\x94\x01", string(msgid), "\xc0\x85",
				"\xa5queue\xa7dialect",
				"\xa2id\xd9\x24", id, // str8 now
				"\xa4type\xa6normal",
				"\xa5retry\x02",
				"\xa7content", content)
			if !bytes.Equal(got, want) {
				t.Errorf("pull answer (current dialect)\n got % x\nwant % x", got, want)
			}
		}
		pullCur(3, "\xa2hi")
		pullCur(4, "\xc4\x03\x00\x01\x02")             // bin stays bin
		pullCur(5, "\xc4\x28"+strings.Repeat("b", 40)) // HTTP bytes as bin
	})
}

// rawRPCGateway starts a gateway of its own (with args) and connects to its
// RPC port for hand-built frames; hc is an HTTP client of the same gateway.
func rawRPCGateway(t *testing.T, args ...string) (hc *Client, nc net.Conn, dec *mpDecoder) {
	t.Helper()
	gw := rpcStart(t, args...)
	nc = rpcDialRaw(t, gw.RPCAddr)
	return gw.Client(t), nc, newMPDecoder(nc)
}

// TestRPCPipelining: many requests in flight on one connection, answered by
// msgid in whatever order they finish; notifications ignored.
func TestRPCPipelining(t *testing.T) {
	t.Parallel()
	_, c := rpcStartDialed(t)

	t.Run("many in flight", func(t *testing.T) {
		c := c.For(t)
		const q, n = "pipe/q", 200
		calls := make([]rpcCall, n)
		for i := range calls {
			calls[i] = rpcCall{"push", []any{q, i}}
		}
		chans, err := c.SendBatch(calls) // one write: all in flight at once
		if err != nil {
			t.Fatal(err)
		}
		rpcAwaitAll(t, c, chans, func(i int, r rpcResponse) {
			if r.Err != nil || r.Result != "ok" {
				t.Errorf("push %d: %#v %q", i, r.Result, r.ErrString())
			}
		})
		for i := range calls {
			calls[i] = rpcCall{"pull", []any{q, 5}}
		}
		if chans, err = c.SendBatch(calls); err != nil {
			t.Fatal(err)
		}
		seen := make(map[int64]bool, n)
		var ids []any
		rpcAwaitAll(t, c, chans, func(i int, r rpcResponse) {
			m, err := rpcPulled(r.Result)
			if err != nil {
				t.Errorf("pull %d: %v (%q)", i, err, r.ErrString())
				return
			}
			v, _ := m.Content.(int64)
			if seen[v] {
				t.Errorf("content %d pulled twice", v)
			}
			seen[v] = true
			ids = append(ids, m.ID)
		})
		if len(seen) != n {
			t.Fatalf("pulled %d distinct messages, want %d", len(seen), n)
		}
		for i := range calls {
			calls[i] = rpcCall{"done", []any{q, ids[i]}}
		}
		if chans, err = c.SendBatch(calls); err != nil {
			t.Fatal(err)
		}
		rpcAwaitAll(t, c, chans, func(i int, r rpcResponse) {
			if r.Result != "ok" {
				t.Errorf("done %d: %#v %q", i, r.Result, r.ErrString())
			}
		})
		c.MustEmpty("pull", q, 0)
	})

	t.Run("blocking pull does not hold up others", func(t *testing.T) {
		c := c.For(t)
		const q = "pipe/block"
		_, blocked, err := c.Send("pull", q) // no timeout: waits for a message
		if err != nil {
			t.Fatal(err)
		}
		// Answered at all, with the pull blocked before them.
		c.MustOK("push", "pipe/other", "x")
		c.MustEmpty("pull", "pipe/other2", 0)
		select {
		case r := <-blocked:
			t.Fatalf("blocking pull answered before any push: %#v", r.Result)
		default:
		}
		c.MustOK("push", q, "wake")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := c.Await(ctx, blocked)
		if err != nil {
			t.Fatalf("blocking pull after a push on the same connection: %v", err)
		}
		m, err := rpcPulled(r.Result)
		if err != nil || m.Content != "wake" {
			t.Fatalf("blocking pull: %+v %v", m, err)
		}
		c.MustOK("done", q, m.ID)
	})

	t.Run("notifications ignored", func(t *testing.T) {
		c := c.For(t)
		const q = "pipe/notif"
		// [2, "push", [q, "x"]] and [2, "nonsense", "not params"]: no answer,
		// no effect, and the connection goes on.
		e := mpEncoder{}
		var b []byte
		b = e.encode(b, []any{2, "push", []any{q, "x"}})
		b = e.encode(b, []any{2, "nonsense", "not params"})
		if err := c.WriteRaw(b); err != nil {
			t.Fatal(err)
		}
		c.MustEmpty("pull", q, 0) // answered, with its own msgid: nothing pushed
		c.MustOK("push", q, "y")
		if m := c.MustPull("pull", q, 5); m.Content != "y" {
			t.Fatalf("pulled %#v, want y", m.Content)
		}
	})
}

// TestRPCDisconnectDuringPull: a client that goes away while its pull waits
// must not take the message pushed next with it. The client half-closes and
// reads the gateway's "empty" for its pull, so the gateway has provably seen
// it go before the push; see TestRPCDisconnectRace for a plain close.
func TestRPCDisconnectDuringPull(t *testing.T) {
	t.Parallel()
	gw, b := rpcStartDialed(t)
	for i, method := range []string{"pull", "pull_any"} {
		q := fmt.Sprintf("gone/%d", i)
		b.MustEmpty("pull", q, 0) // exists, for pull_any
		target := q
		if method == "pull_any" {
			target = "^" + q + "$"
		}
		a := dialRPC(t, gw.RPCAddr)
		_, ch, err := a.Send(method, target) // no timeout: waits
		if err != nil {
			t.Fatal(err)
		}
		awaitWaitingPulls(t, gw.Client(t), 1)
		if err := a.nc.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := a.Await(ctx, ch)
		cancel()
		if err != nil || r.Result != "empty" {
			t.Fatalf("%s of a client that stopped sending: %s %q %v, want \"empty\"", method, rpcShort(r.Result), r.ErrString(), err)
		}
		a.Close()

		b.MustOK("push", q, i)
		// Well before the 30 s timeout, and not counted as a delivery.
		m := b.MustPull("pull", q, 5)
		if m.Content != int64(i) || m.Retry != 2 {
			t.Fatalf("%s: after the client left, got %+v, want content %d with retry 2", method, m, i)
		}
		b.MustOK("done", q, m.ID)
	}
}

// TestRPCDisconnectRace: a client closes its connection while its pull
// waits, and only then is a message pushed (over another connection). The
// message must not go to the departed client. The gateway has the client's
// FIN before the push arrives, but its reader may not have looked yet, and
// writing the answer to the closed connection succeeds, so the message is
// taken as delivered unless the gateway asks the socket before writing.
func TestRPCDisconnectRace(t *testing.T) {
	t.Parallel()
	gw := rpcStart(t)
	c := gw.Client(t)
	b := dialRPC(t, gw.RPCAddr)
	const rounds = 20
	lost := 0
	for i := range rounds {
		q := fmt.Sprintf("race/%d", i)
		b.MustEmpty("pull", q, 0)
		a := dialRPC(t, gw.RPCAddr)
		if _, _, err := a.Send("pull", q); err != nil {
			t.Fatal(err)
		}
		awaitWaitingPulls(t, c, 1) // the pull is waiting in the gateway
		a.Close()
		// Go closes the socket only once the client's reader goroutine has
		// left its Read, and the kernel may take a moment to deliver the FIN
		// (a loaded machine defers it): until then the client is still there.
		<-a.done
		awaitFINArrived(t, a.nc)
		b.MustOK("push", q, i)
		// Well before the queue's 30 s timeout (a loaded machine may take a
		// moment), and without a retry used: the client that left never had it.
		res := b.Must("pull", q, 5)
		if res == "empty" {
			lost++
			continue
		}
		if d, err := rpcPulled(res); err != nil || d.Retry != 2 {
			t.Errorf("round %d: %+v %v, want retry 2 (a delivery to the departed client was counted)", i, d, err)
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d messages pushed after the waiting client closed were handed to it", lost, rounds)
	}
}

// TestRPCBadInput: bad requests are answered with an error string and the
// connection keeps working.
func TestRPCBadInput(t *testing.T) {
	t.Parallel()
	gw, c := rpcStartDialed(t)
	c.MustOK("push", "bad/q", "keep")

	cases := []struct {
		method string
		params []any
	}{
		{"frobnicate", nil},
		{"create", []any{"bad/q"}},
		{"push", []any{"bad/q"}},                     // too few
		{"push", []any{"bad/q", "x", nil, nil}},      // too many
		{"push", []any{1, "x"}},                      // name not a string
		{"pull", nil},                                // too few
		{"pull", []any{"bad/q", "soon"}},             // timeout not a number
		{"pull", []any{"bad/q", -1}},                 // negative timeout
		{"pull", []any{[]any{"bad/q"}}},              // name not a string
		{"pull_any", []any{"("}},                     // invalid regexp
		{"pull_any", []any{"(?=x)", 0}},              // PCRE lookahead, not RE2
		{"push_all", []any{"[", "x"}},                // invalid regexp
		{"push_all", []any{"bad/q"}},                 // too few
		{"done", []any{"bad/q"}},                     // too few
		{"done", []any{"bad/q", "no-such-id"}},       // unknown id
		{"done", []any{"bad/nowhere", "no-such-id"}}, // unknown queue
		{"retain", []any{"bad/q", 12}},               // id not a string
		{"release", []any{"bad/q", nil}},             // id not a string
		{"delete", nil},                              // too few
		{"update_props", []any{"bad/q", "retry=1"}},  // props not a map
		{"update_props", []any{"bad/q", map[string]any{"retry": 1.5}}},
		{"update_props", []any{"bad/q", map[string]any{"retry": "1"}}},
		{"update_props", []any{"bad/q", map[string]any{"timeout": "long"}}},
		{"update_props", []any{"bad/q", map[string]any{"bogus": 1}}},
		{"set_default_props", []any{"not a list"}},
		{"set_default_props", []any{[]any{[]any{"(", map[string]any{"retry": 1}}}}},
		{"set_default_props", []any{[]any{[]any{".*", map[string]any{"retry": "x"}}}}},
		{"get_default_props", []any{"extra"}},
	}
	for _, tc := range cases {
		if e := c.MustFail(tc.method, tc.params...); e == "" {
			t.Errorf("%s%v: empty error string", tc.method, tc.params)
		}
	}
	// Envelopes that are RPC requests but not well-formed calls.
	e := mpEncoder{}
	for _, req := range []struct {
		name  string
		frame func(id uint32) []byte
	}{
		{"params not an array", func(id uint32) []byte { return e.encode(nil, []any{0, id, "push", "bad/q"}) }},
		{"method not a string", func(id uint32) []byte { return e.encode(nil, []any{0, id, 7, []any{}}) }},
		{"method nil", func(id uint32) []byte { return e.encode(nil, []any{0, id, nil, []any{}}) }},
	} {
		id, ch, err := c.register()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WriteRaw(req.frame(id)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		r, err := c.Await(ctx, ch)
		cancel()
		if err != nil || r.Err == nil {
			t.Errorf("%s: %#v %v, want an error answer", req.name, r.Result, err)
		}
	}
	// Nothing of the above changed anything, and the connection still works.
	if got := c.Must("get_default_props"); !reflect.DeepEqual(got, []any{}) {
		t.Errorf("default props after bad input: %#v", got)
	}
	rpcExpectProps(t, gw.Client(t), "bad/q", `{"accum":0,"retry":2,"timeout":30}`)
	m := c.MustPull("pull", "bad/q", 5)
	if m.Content != "keep" || m.Retry != 2 {
		t.Fatalf("after bad input: %+v", m)
	}
	c.MustOK("done", "bad/q", m.ID)
	c.MustEmpty("pull", "bad/q", 0)
}

// TestRPCGarbageFrames: a frame that is not MessagePack-RPC closes that
// connection, and only that one.
func TestRPCGarbageFrames(t *testing.T) {
	t.Parallel()
	gw := rpcStart(t)
	// A bystander with a pull waiting through all of it.
	by := dialRPC(t, gw.RPCAddr)
	_, waiting, err := by.Send("pull", "garbage/by")
	if err != nil {
		t.Fatal(err)
	}

	deep := bytes.Repeat([]byte{0x91}, 100000) // [[[[…]]]]
	cases := []struct {
		name  string
		frame []byte
		// halfClose: the frame is incomplete, so the gateway cannot know it
		// is bad until the client stops sending.
		halfClose bool
	}{
		{"not an array", cat("\xa5hello"), false},
		{"unused format byte", cat("\xc1\x94\x00\x01"), false},
		{"response sent to the server", cat("\x94\x01\x01\xc0\xa2ok"), false},
		{"array of 2", cat("\x92\x00\x01"), false},
		{"negative msgid", cat("\x94\x00\xff\xa4pull\x91\xa1q"), false},
		{"msgid beyond 32 bits", cat("\x94\x00\xcf\x00\x00\x00\x01\x00\x00\x00\x00\xa4pull\x91\xa1q"), false},
		{"type 5", cat("\x94\x05\x01\xa4pull\x91\xa1q"), false},
		{"huge str32", cat("\x94\x00\x01\xa4push\x92\xa1q\xdb\xff\xff\xff\xff"), false},
		{"huge bin32", cat("\x94\x00\x01\xa4push\x92\xa1q\xc6\x7f\xff\xff\xff"), false},
		{"huge array32", cat("\x94\x00\x01\xa4push\xdd\xff\xff\xff\xff"), false},
		{"huge map32", cat("\x94\x00\x01\xa4push\x92\xa1q\xdf\xff\xff\xff\xff"), false},
		{"deep nesting", deep, false},
		{"deep nesting in content", cat("\x94\x00\x01\xa4push\x92\xa1q", string(deep)), false},
		{"truncated", cat("\x94\x00\x01\xa4push\x92\xa1q\xa5hel"), true},
	}
	for seed := range uint64(3) {
		b := make([]byte, 4096)
		r := rand.New(rand.NewPCG(seed, 42))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		cases = append(cases, struct {
			name      string
			frame     []byte
			halfClose bool
		}{fmt.Sprintf("random bytes %d", seed), b, false})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := rpcDialRaw(t, gw.RPCAddr)
			// The gateway may close while we are still writing.
			_ = nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = nc.Write(tc.frame)
			if tc.halfClose {
				_ = nc.(*net.TCPConn).CloseWrite()
			}
			got, err := rpcReadUntilClosed(nc, 5*time.Second)
			if err != nil {
				t.Fatalf("connection not closed after %d bytes of garbage: %v", len(tc.frame), err)
			}
			if len(got) > 0 {
				t.Errorf("garbage answered with % x", got[:min(len(got), 32)])
			}
		})
	}

	// The bystander's connection works, and its waiting pull is served.
	by.MustOK("push", "garbage/other", "x")
	by.MustOK("push", "garbage/by", "still here")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := by.Await(ctx, waiting)
	if err != nil {
		t.Fatalf("bystander's pull: %v", err)
	}
	if m, err := rpcPulled(r.Result); err != nil || m.Content != "still here" {
		t.Fatalf("bystander's pull: %+v %v", m, err)
	}
	// A new client is served as well.
	if m := dialRPC(t, gw.RPCAddr).MustPull("pull", "garbage/other", 5); m.Content != "x" {
		t.Fatalf("new client after garbage: %+v", m)
	}
}

// TestRPCAccumulation: pushes to an accumulating queue answer "packing
// started" then "packed", and the window comes out as one package whose
// content is the array of its parts.
func TestRPCAccumulation(t *testing.T) {
	t.Parallel()
	gw := rpcStart(t)
	c := dialRPC(t, gw.RPCAddr)
	const q = "acc/q"
	c.MustOK("update_props", q, map[string]any{"pack": 0.5})
	if got := c.Must("push", q, "one"); got != "packing started" {
		t.Fatalf("first push: %#v, want \"packing started\"", got)
	}
	if got := c.Must("push", q, map[string]any{"two": []any{2}}); got != "packed" {
		t.Fatalf("second push: %#v, want \"packed\"", got)
	}
	c.MustEmpty("pull", q, 0) // nothing of an open window can be pulled
	m := c.MustPull("pull", q, 5)
	want := []any{"one", map[string]any{"two": []any{int64(2)}}}
	if m.Type != "package" || !reflect.DeepEqual(mpNormalize(m.Content), want) {
		t.Fatalf("package %+v, want type package with content %#v", m, want)
	}
	c.MustOK("done", q, m.ID)
}

// ---- helpers ----

// cat concatenates strings into bytes; frames are written as Go string
// literals with \x escapes.
func cat(parts ...string) []byte { return []byte(strings.Join(parts, "")) }

// rpcDialRaw opens a plain TCP connection to the RPC port, closed when the
// test ends.
func rpcDialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	nc, err := rpcDial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// rpcDial connects to the RPC port. Start returns once HTTP answers, and the
// gateway opens its RPC listener just after its HTTP one, so a refused
// connection is retried for a while.
func rpcDial(addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var d net.Dialer
	for {
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return nc, nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || ctx.Err() != nil {
			return nil, fmt.Errorf("rpc dial %s: %w", addr, err)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return nil, fmt.Errorf("rpc dial %s: %w", addr, err)
		}
	}
}

// rpcExchange writes a frame and returns the next answer's bytes.
func rpcExchange(t testing.TB, nc net.Conn, dec *mpDecoder, req []byte) []byte {
	t.Helper()
	_ = nc.SetDeadline(time.Now().Add(requestTimeout))
	defer nc.SetDeadline(time.Time{})
	if _, err := nc.Write(req); err != nil {
		t.Fatalf("write % x: %v", req, err)
	}
	if _, err := dec.decode(); err != nil {
		t.Fatalf("answer to % x: %v", req, err)
	}
	return bytes.Clone(dec.raw)
}

// rpcRoundTrip writes a frame and fails unless the answer is exactly want.
func rpcRoundTrip(t testing.TB, nc net.Conn, dec *mpDecoder, req, want []byte) {
	t.Helper()
	if got := rpcExchange(t, nc, dec, req); !bytes.Equal(got, want) {
		t.Fatalf("request % x\nanswer % x\n  want % x", req, got, want)
	}
}

// rpcIDOf returns the delivery id of a pull answer.
func rpcIDOf(t testing.TB, frame []byte) string {
	t.Helper()
	v, _, err := mpDecode(frame)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rpcParseResponse(v)
	if err != nil {
		t.Fatal(err)
	}
	m, err := rpcPulled(resp.Result)
	if err != nil {
		t.Fatalf("% x: %v (%q)", frame, err, resp.ErrString())
	}
	return m.ID
}

// rpcReadUntilClosed reads until the peer closes the connection (EOF or a
// reset) and returns what came; an error if it is still open after d.
func rpcReadUntilClosed(nc net.Conn, d time.Duration) ([]byte, error) {
	_ = nc.SetReadDeadline(time.Now().Add(d))
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := nc.Read(buf)
		got = append(got, buf[:n]...)
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return got, fmt.Errorf("still open after %v", d)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
			return got, nil
		}
		return got, nil // any other read error: the connection is gone too
	}
}

func isReset(err error) bool {
	return strings.Contains(err.Error(), "connection reset")
}

// rpcAwaitAll waits for every answer (bounded) and calls check for each in
// request order.
func rpcAwaitAll(t testing.TB, c *rpcClient, chans []<-chan rpcResponse, check func(i int, r rpcResponse)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	for i, ch := range chans {
		r, err := c.Await(ctx, ch)
		if err != nil {
			t.Fatalf("answer %d of %d: %v", i, len(chans), err)
		}
		check(i, r)
	}
}

// rpcExpectProps checks a queue's effective properties over HTTP.
func rpcExpectProps(t testing.TB, hc *Client, queue, want string) {
	t.Helper()
	if got := hc.Props(queue); got != want {
		t.Fatalf("properties of %q: %s, want %s", queue, got, want)
	}
}

// rpcQueueExists reports whether the queue exists, by GET /queues/<name>
// (200 or 404; it does not create the queue). Not GET /stats: that is a
// collection cached for a second.
func rpcQueueExists(t testing.TB, hc *Client, queue string) bool {
	t.Helper()
	r := hc.Do(http.MethodGet, "/queues/"+Q(queue), nil)
	switch r.Status {
	case http.StatusOK:
		return true
	case http.StatusNotFound:
		return false
	}
	t.Fatalf("GET /queues/%s: %v", Q(queue), r)
	return false
}

// mpLoose is mpNormalize with every number as float64, for properties,
// where 2 and 2.0 mean the same.
func mpLoose(v any) any {
	return mpMapLeaves(mpNormalize(v), func(v any) any {
		switch v := v.(type) {
		case int64:
			return float64(v)
		case uint64:
			return float64(v)
		}
		return v
	})
}

// rpcShort prints a value for an error message, long strings cut.
func rpcShort(v any) string {
	s := fmt.Sprintf("%#v", v)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// rpcStart is Start with the test's temporary directory created first.
// Start registers the gateway's shutdown before its own t.TempDir, so the
// data directory's removal (registered by that first TempDir) runs before
// the shutdown, while the gateway still writes there, and fails the test now
// and then ("TempDir RemoveAll cleanup: … directory not empty"). Creating a
// directory first registers the removal earlier, so it runs last.
func rpcStart(t testing.TB, args ...string) *Gateway {
	t.Helper()
	_ = t.TempDir()
	return Start(t, args...)
}

// rpcStartDialed is rpcStart with a MessagePack-RPC connection to the new
// gateway.
func rpcStartDialed(t testing.TB, args ...string) (*Gateway, *rpcClient) {
	t.Helper()
	gw := rpcStart(t, args...)
	return gw, dialRPC(t, gw.RPCAddr)
}
