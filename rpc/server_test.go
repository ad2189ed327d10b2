package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/fakecore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/msgpacktest"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/rpc/wire"
)

var (
	_ Messages = (*fakecore.Messages)(nil)
	_ Queues   = (*fakecore.Queues)(nil)
	_ Inspect  = (*fakecore.Inspect)(nil)
)

// coreOf is a real gateway's Core (CoreOf), a fake core's (its handles),
// or a Core as it is.
func coreOf(c any) Core {
	switch c := c.(type) {
	case *gateway.Gateway:
		return CoreOf(c)
	case *fakecore.Core:
		return Core{Messages: c.Messages(), Queues: c.Queues(), Inspect: c.Inspect()}
	}
	return c.(Core)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startServer serves core on a loopback port until the test ends.
func startServer(t testing.TB, core any, opt Options) (string, *Server) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if opt.Logger == nil {
		opt.Logger = quietLogger()
	}
	s := New(coreOf(core), opt)
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(context.Background(), l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-errc; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return l.Addr().String(), s
}

// startFake serves RPC over a fake core and dials it.
func startFake(t *testing.T, opt Options) (*testClient, *fakecore.Core) {
	t.Helper()
	core := fakecore.New()
	addr, _ := startServer(t, core, opt)
	return dialRPC(t, addr), core
}

func TestFakeMethods(t *testing.T) {
	t.Parallel()
	c, core := startFake(t, Options{})

	c.ok("ok", "push", "q", map[string]any{"a": 1})
	r := c.call("pull", "q")
	d := r.delivery(t)
	if d.Queue != "q" || d.Type != "normal" || d.Retry != 2 || d.ID == "" {
		t.Fatalf("delivery %+v", d)
	}
	if !reflect.DeepEqual(d.Content, map[string]any{"a": int8(1)}) {
		t.Fatalf("content %#v", d.Content)
	}
	msgpacktest.AssertRawDialect(t, r.result)
	c.ok("ok", "retain", "q", d.ID)
	c.ok("ok", "done", "q", d.ID)
	if e := c.fails("done", "q", d.ID); e != "not_found" {
		t.Fatalf("done twice: %q", e)
	}

	c.ok("ok", "push", "q", "again")
	d = c.call("pull", "q", 0).delivery(t)
	c.ok("ok", "release", "q", d.ID)
	d = c.call("pull", "q", 0.5).delivery(t)
	c.ok("ok", "done", "q", d.ID)
	c.ok("empty", "pull", "q", 0)
	c.ok("empty", "pull", "q", 0.05)
	c.ok("empty", "pull", "q", 1) // integer timeout
	c.ok("empty", "pull_any", "^q$", 0.05)

	c.ok("packing started", "push", "pkg1", "a")
	c.ok("packed", "push", "pkg1", []byte{1, 2})
	d = c.call("pull_any", "^pkg").delivery(t)
	if d.Type != "package" || !reflect.DeepEqual(d.Content, []any{"a", "\x01\x02"}) {
		t.Fatalf("package %+v", d)
	}

	c.ok("ok", "push_all", "^q$|^pkg", 3.5)
	d = c.call("pull", "q").delivery(t)
	if d.Content != 3.5 {
		t.Fatalf("push_all content %#v", d.Content)
	}

	c.ok("ok", "delete", "q")
	c.ok("ok", "delete", "never-existed")

	c.ok("ok", "update_props", "q", map[string]any{"pack": 0.5, "retry": 3})
	c.ok("ok", "update_props", "r", map[string]any{"accum": 1, "timeout": 2.5})
	p, _ := core.Props("q")
	pr, _ := core.Props("r")
	if p.Accum == nil || *p.Accum != 0.5 || p.Retry == nil || *p.Retry != 3 || pr.Accum == nil || *pr.Accum != 1 || *pr.Timeout != 2.5 {
		t.Fatalf("props %+v %+v", p, pr)
	}
	c.ok("ok", "update_props", "q")
	_, still := core.Props("q")
	if still {
		t.Fatal("update_props without props did not reset")
	}

	c.defaultPropsRoundTrip(30)
	c.fails("create", "q")
}

func TestFakeBadInput(t *testing.T) {
	t.Parallel()
	c, core := startFake(t, Options{})

	c.failAll([]badCall{
		{"nosuch", nil, "undef"},
		{"create", []any{"q"}, "undef"},
		{"push", []any{"q"}, "badarg"},
		{"push", []any{"q", 1, 2}, "badarg"},
		{"push", []any{1, "x"}, "badarg"},
		{"push", []any{"", "x"}, "badarg"},
		{"pull", []any{}, "badarg"},
		{"pull", []any{"q", "soon"}, "badarg"},
		{"pull", []any{"q", -1}, "badarg"},
		{"pull", []any{[]any{"q"}}, "badarg"},
		{"done", []any{"q"}, "badarg"},
		{"done", []any{"q", 5}, "badarg"},
		{"done", []any{"q", "no-such-id"}, "not_found"},
		{"release", []any{"q", "no-such-id"}, "not_found"},
		{"retain", []any{"q", "no-such-id"}, "not_found"},
		{"push_all", []any{"(", "x"}, "invalid_regexp"},
		{"pull_any", []any{"[z-a]", 0}, "invalid_regexp"},
		{"update_props", []any{"q", map[string]any{"retry": 1.5}}, "invalid_props"},
		{"update_props", []any{"q", map[string]any{"colour": 1}}, "invalid_props"},
		{"update_props", []any{"q", "retry"}, "invalid_props"},
		{"update_props", []any{"q", map[int]any{1: 1}}, "badarg"},
		{"set_default_props", []any{[]any{[]any{"(", map[string]any{}}}}, "invalid_props"},
		{"set_default_props", []any{map[string]any{}}, "invalid_props"},
		{"get_default_props", []any{1}, "badarg"},
	})

	// params not an array, method not a string: errors, connection kept.
	c.write([]byte{0x94, 0x00, 0xcd, 0x10, 0x00, 0xa4, 'p', 'u', 'l', 'l', 0xa1, 'q'})
	if r := c.recv(); r.msgid != 0x1000 || r.err == nil {
		t.Fatalf("params not an array: %+v", r)
	}
	c.write([]byte{0x94, 0x00, 0xcd, 0x10, 0x01, 0x07, 0x90})
	if r := c.recv(); r.msgid != 0x1001 || r.err == nil {
		t.Fatalf("method not a string: %+v", r)
	}
	pushes := core.Pushes()
	if pushes != 0 {
		t.Fatalf("bad requests pushed %d messages", pushes)
	}
	c.ok("ok", "push", "q", "still working")
}

// Requests and answers written byte by byte, in both dialects.
func TestRawFrames(t *testing.T) {
	t.Parallel()
	c, core := startFake(t, Options{})

	// Old dialect: [0, 1, "push", ["q", "hello"]].
	c.write([]byte{0x94, 0x00, 0x01, 0xa4, 'p', 'u', 's', 'h', 0x92, 0xa1, 'q', 0xa5, 'h', 'e', 'l', 'l', 'o'})
	want := []byte{0x94, 0x01, 0x01, 0xc0, 0xa2, 'o', 'k'}
	got := make([]byte, len(want))
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c.conn, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("push answer % x, %v; want % x", got, err, want)
	}
	// New dialect: [0, 2, str8 "push", [bin8 "q", [str8 <40 x>, bin8 {1,2,3}]]].
	long := strings.Repeat("x", 40)
	b := []byte{0x94, 0x00, 0x02, 0xd9, 0x04, 'p', 'u', 's', 'h', 0x92, 0xc4, 0x01, 'q', 0x92, 0xd9, 40}
	b = append(b, long...)
	b = append(b, 0xc4, 0x03, 1, 2, 3)
	c.write(b)
	if r := c.recv(); r.msgid != 2 || r.str(t) != "ok" {
		t.Fatalf("new-dialect push: %+v", r)
	}
	// A message pushed over HTTP (not MessagePack) comes back as raw bytes.
	core.Put("q", gateway.Message{ContentType: "text/plain", Body: []byte(long)})

	// Answers, in LMQ's dialect: no str8, no bin.
	wantContents := []any{"hello", []any{long, "\x01\x02\x03"}, long}
	for i, wc := range wantContents {
		r := c.call("pull", "q", 0)
		msgpacktest.AssertRawDialect(t, r.result)
		d := r.delivery(t)
		if !reflect.DeepEqual(d.Content, wc) {
			t.Fatalf("pull %d: content %#v, want %#v", i, d.Content, wc)
		}
		c.ok("ok", "done", "q", d.ID)
	}
	// The exact bytes of a pulled message.
	core.Put("q", gateway.Message{ContentType: mapping.ContentTypeMsgpack, Body: []byte{0x91, 0xc0}})
	r := c.call("pull", "q", 0)
	d := r.delivery(t)
	wantRes := []byte{0x85,
		0xa5, 'q', 'u', 'e', 'u', 'e', 0xa1, 'q',
		0xa2, 'i', 'd'}
	wantRes = wire.AppendStr(wantRes, d.ID, wire.DialectRaw)
	wantRes = append(wantRes, 0xa4, 't', 'y', 'p', 'e', 0xa6, 'n', 'o', 'r', 'm', 'a', 'l',
		0xa5, 'r', 'e', 't', 'r', 'y', 0x02,
		0xa7, 'c', 'o', 'n', 't', 'e', 'n', 't', 0x91, 0xc0)
	if !bytes.Equal(r.result, wantRes) {
		t.Fatalf("pull result\n% x\nwant\n% x", []byte(r.result), wantRes)
	}
}

func TestCurrentDialect(t *testing.T) {
	t.Parallel()
	c, core := startFake(t, Options{Dialect: wire.DialectCurrent})
	long := strings.Repeat("y", 40)
	c.ok("ok", "push", "q", []any{long, []byte{9}})
	core.Put("q", gateway.Message{Body: []byte("bytes")})
	r := c.call("pull", "q", 0)
	if !bytes.Contains(r.result, append([]byte{0xd9, 40}, long...)) || !bytes.Contains(r.result, []byte{0xc4, 0x01, 9}) {
		t.Fatalf("current dialect pull: % x", []byte(r.result))
	}
	if d := r.delivery(t); !reflect.DeepEqual(d.Content, []any{long, []byte{9}}) {
		t.Fatalf("content %#v", d.Content)
	}
	if d := c.call("pull", "q", 0).delivery(t); !bytes.Equal(d.raw, []byte{0xc4, 5, 'b', 'y', 't', 'e', 's'}) {
		t.Fatalf("binary content % x", []byte(d.raw))
	}
}

// A blocking pull does not hold up other requests on its connection, and
// answers are matched by msgid.
func TestPipelining(t *testing.T) {
	t.Parallel()
	c, core := startFake(t, Options{})

	pullID := c.send("pull", "wait-here")
	<-core.Waiting()
	// Several requests in one write.
	var b []byte
	for i := range 5 {
		b = append(b, encodeRequest(t, uint32(100+i), "push", fmt.Sprintf("other%d", i), i)...)
	}
	c.write(b)
	seen := map[uint32]bool{}
	for range 5 {
		r := c.recv()
		if r.msgid < 100 || r.msgid > 104 || seen[r.msgid] || r.str(t) != "ok" {
			t.Fatalf("unexpected answer %+v", r)
		}
		seen[r.msgid] = true
	}
	c.pushWakes(pullID, "wait-here", "wake")
}

func TestNotificationIgnored(t *testing.T) {
	t.Parallel()
	c, core := startFake(t, Options{})
	// [2, "push", ["q", "x"]] then a request: only the request is answered.
	c.write([]byte{0x93, 0x02, 0xa4, 'p', 'u', 's', 'h', 0x92, 0xa1, 'q', 0xa1, 'x'})
	c.ok("empty", "pull", "q", 0)
	if core.Pushes() != 0 {
		t.Fatal("a notification was executed")
	}
}

func TestHostileFrames(t *testing.T) {
	t.Parallel()
	core := fakecore.New()
	addr, _ := startServer(t, core, Options{Limits: wire.Limits{MaxFrameSize: 1 << 20}})
	bystander := dialRPC(t, addr)
	bystanderPull := bystander.send("pull", "bystander")

	cases := map[string][]byte{
		"not an array":         {0xa3, 'a', 'b', 'c'},
		"integer":              {0x05},
		"wrong type field":     {0x94, 0x07, 0x01, 0xa1, 'x', 0x90},
		"response from client": {0x94, 0x01, 0x01, 0xc0, 0xc0},
		"msgid not an int":     {0x94, 0x00, 0xa1, 'x', 0xa1, 'x', 0x90},
		"never-used byte":      {0x94, 0x00, 0x01, 0xc1},
		"huge str32":           {0x94, 0x00, 0x01, 0xa4, 'p', 'u', 's', 'h', 0x92, 0xa1, 'q', 0xdb, 0xff, 0xff, 0xff, 0xff, 'x'},
		"huge array32":         {0x94, 0x00, 0x01, 0xa4, 'p', 'u', 's', 'h', 0x92, 0xa1, 'q', 0xdd, 0xff, 0xff, 0xff, 0xff},
		"huge map32":           {0xdf, 0x7f, 0xff, 0xff, 0xff},
		"deep nesting":         bytes.Repeat([]byte{0x91}, 1000),
		"random bytes":         {0xde, 0x12, 0x9c, 0xff, 0xc1, 0x00, 0x42, 0x13, 0x37},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			c := dialRPC(t, addr)
			c.write(b)
			c.closed()
		})
	}
	// A frame cut short by the client leaving: nothing to answer, no harm.
	c := dialRPC(t, addr)
	c.write([]byte{0x94, 0x00, 0x01, 0xa4, 'p', 'u'})
	c.conn.Close()

	// The other client noticed nothing.
	bystander.ok("ok", "push", "q", "x")
	pushID := bystander.send("push", "bystander", "y")
	for range 2 {
		r := bystander.recv()
		if r.err != nil || (r.msgid != pushID && r.msgid != bystanderPull) {
			t.Fatalf("bystander answer %+v", r)
		}
	}
}

// A message handed out while its client is leaving goes back to the queue.
func TestAbandonOnDisconnect(t *testing.T) {
	t.Parallel()
	core := fakecore.New()
	core.DeliverOnCancel()
	addr, _ := startServer(t, core, Options{})
	c := dialRPC(t, addr)
	c.send("pull", "q")
	<-core.Waiting()
	core.Put("q", gateway.Message{Body: []byte("precious")})
	c.conn.Close()

	testwait.ForDetail(t, "the delivery abandoned and back in the queue", func() (bool, string) {
		n, left := len(core.Abandoned()), core.Size("q")
		return n == 1 && left == 1, fmt.Sprintf("abandoned %d, left in queue %d", n, left)
	})
	c2 := dialRPC(t, addr)
	if d := c2.call("pull", "q", 0).delivery(t); d.Content != "precious" {
		t.Fatalf("content %#v", d.Content)
	}
}

func TestShutdown(t *testing.T) {
	t.Parallel()
	core := fakecore.New()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(coreOf(core), Options{Logger: quietLogger()})
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(context.Background(), l) }()
	c := dialRPC(t, l.Addr().String())
	id := c.send("pull", "q")
	<-core.Waiting()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if r := c.recv(); r.msgid != id || r.str(t) != "empty" {
		t.Fatalf("waiting pull answered %+v, want empty", r)
	}
	c.closed()
	if err := <-errc; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err == nil {
		t.Fatal("still accepting after Shutdown")
	}
	if err := s.Serve(context.Background(), l); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
}

// Serve's context ending closes its listener and connections.
func TestServeContext(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(coreOf(fakecore.New()), Options{Logger: quietLogger()})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, l) }()
	c := dialRPC(t, l.Addr().String())
	c.ok("ok", "push", "q", 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve: %v", err)
	}
	c.closed()
}

// With MaxInFlight reached, the server stops reading that connection.
func TestMaxInFlight(t *testing.T) {
	t.Parallel()
	c, _ := startFake(t, Options{MaxInFlight: 2})
	p1 := c.send("pull", "a", 0.3)
	p2 := c.send("pull", "b", 1)
	push := c.send("push", "c", 1)
	var order []uint32
	for range 3 {
		order = append(order, c.recv().msgid)
	}
	// The push waits for the first pull to free a slot, then overtakes the second.
	if want := []uint32{p1, push, p2}; !reflect.DeepEqual(order, want) {
		t.Fatalf("answer order %v, want %v", order, want)
	}
}
