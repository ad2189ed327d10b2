package rpc

import (
	"bytes"
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/lmq-gateway/lmq-gateway/accumulator"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/msgpacktest"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testcore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/rpc/wire"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// startCore runs an in-process JetStream server and a real core on it.
func startCore(t *testing.T) *gateway.Gateway {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	g := testcore.New(t, nc, gateway.Config{Replicas: 1, Logger: quietLogger()})
	acc := accumulator.New(bus.New(nc), g, accumulator.Config{Logger: quietLogger()})
	if err := acc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(acc.Stop)
	g.SetAccumulator(acc)
	return g
}

// startReal serves RPC over a real core.
// pullWaits turns on g's dispatcher's WaiterParked signal, afresh, and
// returns a function that waits for a pull that may wait to register on
// queue: call it before the pull is sent, the function after.
func pullWaits(t *testing.T, g *gateway.Gateway, queue string) func() {
	sig := &gateway.Signals(g).Dispatch.WaiterParked
	sig.Init(t)
	return func() {
		t.Helper()
		sig.WaitFor("the pull on "+queue+" waits", func(p dispatch.Parked) bool { return p.Queue == queue && !p.NoWait })
	}
}

func startReal(t *testing.T, opt Options) (*testClient, *gateway.Gateway, string) {
	t.Helper()
	g := startCore(t)
	addr, _ := startServer(t, g, opt)
	return dialRPC(t, addr), g, addr
}

func TestIntegrationMethods(t *testing.T) {
	t.Parallel()
	c, g, _ := startReal(t, Options{})

	c.ok("ok", "push", "q", "one")
	r := c.call("pull", "q", 5)
	msgpacktest.AssertRawDialect(t, r.result)
	d := r.delivery(t)
	if d.Queue != "q" || d.Type != "normal" || d.Retry != 2 || d.Content != "one" || len(d.ID) != 36 {
		t.Fatalf("delivery %+v", d)
	}
	c.ok("ok", "retain", "q", d.ID)
	c.ok("ok", "done", "q", d.ID)
	if e := c.fails("done", "q", d.ID); e != "not_found" {
		t.Fatalf("second done: %q", e)
	}
	c.ok("empty", "pull", "q", 0)
	c.ok("empty", "pull", "q", 0.2)

	// release: back at once, one retry used, a new id; the old one is dead.
	c.ok("ok", "push", "q", "two")
	d1 := c.call("pull", "q").delivery(t)
	c.ok("ok", "release", "q", d1.ID)
	d2 := c.call("pull", "q", 5).delivery(t)
	if d2.Content != "two" || d2.Retry != 1 || d2.ID == d1.ID {
		t.Fatalf("after release: %+v (first %+v)", d2, d1)
	}
	if e := c.fails("done", "q", d1.ID); e != "not_found" {
		t.Fatalf("done with released id: %q", e)
	}
	c.ok("ok", "done", "q", d2.ID)

	// push_all reaches existing matching queues only; pull_any finds them.
	c.ok("empty", "pull", "pa-1", 0)
	c.ok("empty", "pull", "pa-2", 0)
	c.ok("ok", "push_all", "^pa-", "all")
	seen := map[string]bool{}
	for range 2 {
		d := c.call("pull_any", "^pa-", 5).delivery(t)
		if d.Content != "all" {
			t.Fatalf("pull_any %+v", d)
		}
		seen[d.Queue] = true
		c.ok("ok", "done", d.Queue, d.ID)
	}
	if !seen["pa-1"] || !seen["pa-2"] {
		t.Fatalf("pull_any served %v", seen)
	}
	c.ok("empty", "pull_any", "^pa-", 0)
	c.ok("ok", "push_all", "^nothing-matches$", "x")

	// delete drops the messages.
	c.ok("ok", "push", "del", "x")
	c.ok("ok", "delete", "del")
	c.ok("empty", "pull", "del", 0)

	// Properties: timeout via update_props; without props back to defaults.
	c.ok("ok", "update_props", "short", map[string]any{"timeout": 0.2, "retry": 0})
	c.ok("ok", "push", "short", "t")
	timedOut := gateway.Signals(g).TimedOut
	timedOut.Init(t)
	d = c.call("pull", "short", 5).delivery(t)
	if d.Retry != 0 {
		t.Fatalf("retry 0 queue: first delivery says %d", d.Retry)
	}
	timedOut.WaitFor("the delivery timed out", func(x gateway.TimedOutDelivery) bool { return x.ID == d.ID })
	if e := c.fails("done", "short", d.ID); e != "not_found" {
		t.Fatalf("done after timeout: %q", e)
	}
	c.ok("ok", "update_props", "short")
	c.ok("ok", "update_props", "packq", map[string]any{"pack": 0})

	// The default list, accum reported as pack.
	c.defaultPropsRoundTrip(30.0)
	c.ok("ok", "set_default_props", []any{})
	if v := c.call("get_default_props").value(t); !reflect.DeepEqual(v, []any{}) {
		t.Fatalf("cleared default list %#v", v)
	}

	if e := c.fails("create", "q"); !strings.HasPrefix(e, "undef") {
		t.Fatalf("create: %q", e)
	}
}

func TestIntegrationAccumulation(t *testing.T) {
	t.Parallel()
	c, _, _ := startReal(t, Options{})
	c.ok("ok", "update_props", "acc", map[string]any{"pack": 0.3})
	// The core has an accumulator (startCore): an error here ("unavailable"
	// included) is a regression, not a reason to skip.
	r := c.call("push", "acc", "a")
	if r.err != nil {
		t.Fatalf("first push to an accumulating queue: error %v, want \"packing started\"", r.err)
	}
	if got := r.str(t); got != "packing started" {
		t.Fatalf("first push: %q", got)
	}
	c.ok("packed", "push", "acc", map[string]any{"b": 2})
	d := c.call("pull", "acc", 5).delivery(t)
	if d.Type != "package" || !reflect.DeepEqual(d.Content, []any{"a", map[string]any{"b": int8(2)}}) {
		t.Fatalf("package %+v", d)
	}
	c.ok("ok", "done", "acc", d.ID)
}

// richContent exercises every MessagePack type a client may push.
func richContent() map[string]any {
	return map[string]any{
		"nil":    nil,
		"bools":  []any{true, false},
		"ints":   []any{0, 1, -1, 127, 128, -33, 65536, int64(math.MaxInt64), int64(math.MinInt64), uint64(math.MaxUint64)},
		"floats": []any{0.5, -1e300, float32(1.5)},
		"short":  "hé",
		"long":   strings.Repeat("long string ", 30),
		"bin":    []byte{0, 1, 2, 255},
		"nested": map[string]any{"deeper": []any{map[string]any{"x": []any{}}, map[string]any{}}},
	}
}

func TestIntegrationContentRoundTrip(t *testing.T) {
	t.Parallel()
	g := startCore(t)
	for _, d := range []wire.Dialect{wire.DialectRaw, wire.DialectCurrent} {
		t.Run(d.String(), func(t *testing.T) {
			addr, _ := startServer(t, g, Options{Dialect: d})
			c := dialRPC(t, addr)
			q := "content/" + d.String()
			pushed := marshal(t, richContent())
			c.ok("ok", "push", q, richContent())
			r := c.call("pull", q, 5)
			dl := r.delivery(t)
			var got, want any
			if err := msgpack.Unmarshal(dl.raw, &got); err != nil {
				t.Fatal(err)
			}
			if err := msgpack.Unmarshal(pushed, &want); err != nil {
				t.Fatal(err)
			}
			if d == wire.DialectRaw {
				msgpacktest.AssertRawDialect(t, r.result)
				// LMQ's dialect has no binary type: binaries come back as raw strings.
				want.(map[string]any)["bin"] = "\x00\x01\x02\xff"
			} else if !bytes.Equal(dl.raw, pushed) {
				t.Fatalf("current dialect changed the content bytes:\n% x\n% x", []byte(dl.raw), pushed)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("content\n%#v\nwant\n%#v", got, want)
			}
			c.ok("ok", "done", q, dl.ID)
		})
	}
}

// Content crosses protocols: what RPC pushes is stored as MessagePack with its
// content-type; what others push comes back over RPC as bytes. The core calls
// stand in for the HTTP front end.
func TestIntegrationCrossProtocol(t *testing.T) {
	t.Parallel()
	c, g, _ := startReal(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	c.ok("ok", "push", "x", map[string]any{"k": []any{1, "v"}})
	d, err := g.Messages().Pull(ctx, "x", 5*time.Second)
	if err != nil || d == nil {
		t.Fatalf("core pull: %v %v", d, err)
	}
	want := marshal(t, map[string]any{"k": []any{1, "v"}})
	if d.Message.ContentType != mapping.ContentTypeMsgpack || !bytes.Equal(d.Message.Body, want) {
		t.Fatalf("stored %q % x, want %q % x", d.Message.ContentType, d.Message.Body, mapping.ContentTypeMsgpack, want)
	}
	if err := g.Messages().Reply(ctx, "x", d.ID, gateway.Ack); err != nil {
		t.Fatal(err)
	}

	for _, m := range []gateway.Message{
		{ContentType: "text/plain", Body: []byte("plain text")},
		{Body: []byte{0xc1, 0xff}},
		// Claims to be MessagePack but is not: still delivered, as bytes.
		{ContentType: mapping.ContentTypeMsgpack, Body: []byte{0x92, 0x01}},
	} {
		if _, err := g.Messages().Push(ctx, "y", m); err != nil {
			t.Fatal(err)
		}
		r := c.call("pull", "y", 5)
		msgpacktest.AssertRawDialect(t, r.result)
		dl := r.delivery(t)
		if dl.Content != string(m.Body) {
			t.Fatalf("content %#v, want the bytes % x", dl.Content, m.Body)
		}
		c.ok("ok", "done", "y", dl.ID)
	}
	// HTTP-pushed MessagePack is decoded like RPC-pushed.
	if _, err := g.Messages().Push(ctx, "y", gateway.Message{ContentType: mapping.ContentTypeMsgpack, Body: []byte{0x92, 0x01, 0xa1, 'z'}}); err != nil {
		t.Fatal(err)
	}
	if dl := c.call("pull", "y", 5).delivery(t); !reflect.DeepEqual(dl.Content, []any{int8(1), "z"}) {
		t.Fatalf("content %#v", dl.Content)
	}
}

func TestIntegrationPipelining(t *testing.T) {
	t.Parallel()
	c, g, _ := startReal(t, Options{})
	waits := pullWaits(t, g, "pipe")
	pullID := c.send("pull", "pipe")
	waits()
	otherID := c.send("push", "elsewhere", 1)
	if r := c.recv(); r.msgid != otherID || r.str(t) != "ok" {
		t.Fatalf("push to another queue held up: %+v", r)
	}
	c.pushWakes(pullID, "pipe", "go")
}

// A client leaving during a blocking pull loses no message, and it does not
// count as a retry.
func TestIntegrationDisconnectDuringPull(t *testing.T) {
	t.Parallel()
	c, g, addr := startReal(t, Options{})
	waits := pullWaits(t, g, "dq")
	c.send("pull", "dq")
	waits()
	c.conn.Close()
	testwait.For(t, "the pull is given up", func() bool { return g.Inspect().WaitingPulls() == 0 })

	c2 := dialRPC(t, addr)
	c2.ok("ok", "push", "dq", "kept")
	d := c2.call("pull", "dq", 5).delivery(t)
	if d.Content != "kept" || d.Retry != 2 {
		t.Fatalf("after disconnect: %+v", d)
	}
	c2.ok("ok", "done", "dq", d.ID)

	// The push racing the disconnect. Either the answer was written before the
	// client's close reached the server (then the message was handed out, and
	// comes back after its timeout, one retry used), or it was not (then it is
	// back at once, retries intact). Lost, never.
	c2.ok("ok", "update_props", "race", map[string]any{"timeout": 0.5})
	for i := range 5 {
		c := dialRPC(t, addr)
		waits := pullWaits(t, g, "race")
		c.send("pull", "race")
		waits()
		c2.send("push", "race", i)
		c.conn.Close()
		if r := c2.recv(); r.str(t) != "ok" {
			t.Fatalf("push: %+v", r)
		}
		d := c2.call("pull", "race", 5).delivery(t)
		if d.Content != int8(i) || (d.Retry != 2 && d.Retry != 1) {
			t.Fatalf("round %d: %+v", i, d)
		}
		c2.ok("ok", "done", "race", d.ID)
	}
}

func TestIntegrationBadInput(t *testing.T) {
	t.Parallel()
	c, _, addr := startReal(t, Options{})
	for _, tc := range []struct {
		method string
		params []any
	}{
		{"no_such_method", nil},
		{"create", []any{"q"}},
		{"push", []any{"q"}},
		{"push", []any{42, "x"}},
		{"pull", []any{"q", "later"}},
		{"pull", []any{"q", 1, 2}},
		{"done", []any{"q", "f0eca12e-19f2-4922-bcc9-6e42bd585937"}},
		{"push_all", []any{"(unclosed", "x"}},
		{"pull_any", []any{"*", 0}},
		{"update_props", []any{"q", map[string]any{"retry": "two"}}},
		{"update_props", []any{"q", map[string]any{"bogus": 1}}},
		{"set_default_props", []any{[]any{[]any{"(", map[string]any{"retry": 1}}}}},
		{"set_default_props", []any{"not a list"}},
	} {
		c.fails(tc.method, tc.params...)
	}
	// The connection still works, and nothing was stored by the failures.
	c.ok("empty", "pull", "q", 0)

	bad := dialRPC(t, addr)
	bad.write([]byte{0xc1, 0xde, 0xad, 0xbe, 0xef})
	bad.closed()
	c.ok("ok", "push", "q", "after garbage")
}

// Shutdown with a real core: the waiting pull answers empty.
func TestIntegrationShutdown(t *testing.T) {
	t.Parallel()
	g := startCore(t)
	addr, s := startServer(t, g, Options{})
	c := dialRPC(t, addr)
	waits := pullWaits(t, g, "sd")
	id := c.send("pull", "sd")
	waits()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := c.tryRecv(5 * time.Second)
	if err != nil || r.msgid != id || r.str(t) != "empty" {
		t.Fatalf("pull during shutdown: %+v, %v", r, err)
	}
	if _, err := c.tryRecv(5 * time.Second); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("connection not closed: %v", err)
	}
}

// TestIntegrationPushDelay: push's optional third argument (beyond LMQ).
func TestIntegrationPushDelay(t *testing.T) {
	t.Parallel()
	c, _, _ := startReal(t, Options{})
	c.ok("ok", "push", "delayed", "later", map[string]any{"delay": 1.0})
	c.ok("empty", "pull", "delayed", 0.3)
	if d := c.call("pull", "delayed", 5).delivery(t); d.Content != "later" {
		t.Fatalf("pull after delay: %+v", d)
	}
	c.fails("push", "delayed", "x", map[string]any{"bogus": 1})
	c.fails("push", "delayed", "x", "not a map")
}

// TestIntegrationPushIdempotencyKey: push's option idempotency_key (the
// HTTP Idempotency-Key header) stores a retried push once; other keys and
// pushes without a key are stored each time; a key that is not a string,
// or not a valid key, is refused and stores nothing.
func TestIntegrationPushIdempotencyKey(t *testing.T) {
	t.Parallel()
	c, _, _ := startReal(t, Options{})
	key := map[string]any{"idempotency_key": "order-17"}
	c.ok("ok", "push", "idem", "first", key)
	c.ok("ok", "push", "idem", "retried", key) // acknowledged, not stored again
	c.ok("ok", "push", "idem", "bin key", map[string]any{"idempotency_key": []byte("order-18")})
	c.ok("ok", "push", "idem", "no key")
	if msg := c.fails("push", "idem", "x", map[string]any{"idempotency_key": 17}); !strings.Contains(msg, "idempotency_key must be a string") {
		t.Errorf("numeric key: %q", msg)
	}
	c.fails("push", "idem", "x", map[string]any{"idempotency_key": "bad\nkey"})
	c.fails("push", "idem", "x", map[string]any{"idempotency_key": strings.Repeat("k", 257)})
	var got []string
	for {
		r := c.call("pull", "idem", 0)
		if s, ok := r.value(t).(string); ok && s == "empty" {
			break
		}
		d := r.delivery(t)
		content, _ := d.Content.(string)
		got = append(got, content)
		c.ok("ok", "done", "idem", d.ID)
	}
	if strings.Join(got, "|") != "first|bin key|no key" {
		t.Fatalf("stored: %q, want first, bin key, no key", got)
	}
}
