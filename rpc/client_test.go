package rpc

import (
	"bytes"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/msgpacktest"
)

// testClient is a MessagePack-RPC client built on vmihailenco/msgpack and
// hand-made bytes, independent of the server's codec.
type testClient struct {
	t    testing.TB
	conn net.Conn
	dec  *msgpack.Decoder
	next uint32
}

// response is one answer as the client sees it.
type response struct {
	msgid  uint32
	err    any
	result msgpack.RawMessage
}

func dialRPC(t testing.TB, addr string) *testClient {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &testClient{t: t, conn: conn, dec: msgpack.NewDecoder(conn), next: 1}
}

// marshal encodes v as the test client does: current dialect, compact ints,
// map keys sorted (so that the same value always gives the same bytes).
func marshal(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encode: %v", err)
	}
	return buf.Bytes()
}

// encodeRequest builds [0, msgid, method, params] in the current dialect.
func encodeRequest(t testing.TB, msgid uint32, method string, params ...any) []byte {
	t.Helper()
	if params == nil {
		params = []any{}
	}
	return marshal(t, []any{0, msgid, method, params})
}

func (c *testClient) write(b []byte) {
	c.t.Helper()
	c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.conn.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// send sends a request and returns its msgid.
func (c *testClient) send(method string, params ...any) uint32 {
	c.t.Helper()
	id := c.next
	c.next++
	c.write(encodeRequest(c.t, id, method, params...))
	return id
}

// recv reads one response, failing the test if none comes in 10 s.
func (c *testClient) recv() response {
	c.t.Helper()
	r, err := c.tryRecv(10 * time.Second)
	if err != nil {
		c.t.Fatalf("recv: %v", err)
	}
	return r
}

func (c *testClient) tryRecv(wait time.Duration) (response, error) {
	c.conn.SetReadDeadline(time.Now().Add(wait))
	var r response
	n, err := c.dec.DecodeArrayLen()
	if err != nil {
		return r, err
	}
	if n != 4 {
		return r, errors.New("response is not an array of 4")
	}
	typ, err := c.dec.DecodeInt()
	if err != nil || typ != 1 {
		return r, errors.New("response type is not 1")
	}
	if r.msgid, err = c.dec.DecodeUint32(); err != nil {
		return r, err
	}
	if r.err, err = c.dec.DecodeInterface(); err != nil {
		return r, err
	}
	if r.result, err = c.dec.DecodeRaw(); err != nil {
		return r, err
	}
	return r, nil
}

// call sends a request and reads its answer (nothing else may be in flight).
func (c *testClient) call(method string, params ...any) response {
	c.t.Helper()
	id := c.send(method, params...)
	r := c.recv()
	if r.msgid != id {
		c.t.Fatalf("%s: answer for msgid %d, want %d", method, r.msgid, id)
	}
	return r
}

// ok asserts a call succeeded with the string result want.
func (c *testClient) ok(want string, method string, params ...any) {
	c.t.Helper()
	r := c.call(method, params...)
	if r.err != nil {
		c.t.Fatalf("%s%v: error %v", method, params, r.err)
	}
	if got := r.str(c.t); got != want {
		c.t.Fatalf("%s%v = %q, want %q", method, params, got, want)
	}
}

// pushWakes pushes body to queue, on which the pull sent as pullID waits,
// and asserts that both are answered, in either order: the push with "ok",
// the pull with body.
func (c *testClient) pushWakes(pullID uint32, queue, body string) {
	c.t.Helper()
	pushID := c.send("push", queue, body)
	got := map[uint32]response{}
	for range 2 {
		r := c.recv()
		got[r.msgid] = r
	}
	if got[pushID].str(c.t) != "ok" {
		c.t.Fatalf("push answer %+v", got[pushID])
	}
	if d := got[pullID].delivery(c.t); d.Content != body {
		c.t.Fatalf("pull answer %+v, want content %q", d, body)
	}
}

// defaultPropsRoundTrip asserts that the list of default properties starts
// empty, sets two entries, the first with accum 30 given as accum (an
// integer or a float), and reads them back as LMQ answers them (accum as
// pack, numbers compact).
func (c *testClient) defaultPropsRoundTrip(accum any) {
	c.t.Helper()
	if v := c.call("get_default_props").value(c.t); !reflect.DeepEqual(v, []any{}) {
		c.t.Fatalf("initial default list %#v", v)
	}
	c.ok("ok", "set_default_props", []any{
		[]any{"accum/.*", map[string]any{"accum": accum, "timeout": 0.5}},
		[]any{".*", map[string]any{"retry": 0}},
	})
	r := c.call("get_default_props")
	msgpacktest.AssertRawDialect(c.t, r.result)
	want := []any{
		[]any{"accum/.*", map[string]any{"pack": int8(30), "timeout": 0.5}},
		[]any{".*", map[string]any{"retry": int8(0)}},
	}
	if v := r.value(c.t); !reflect.DeepEqual(v, want) {
		c.t.Fatalf("get_default_props %#v, want %#v", v, want)
	}
}

// badCall is a call that must fail with an error starting with prefix.
type badCall struct {
	method string
	params []any
	prefix string
}

// failAll makes each call in turn and asserts that it fails as it must.
func (c *testClient) failAll(calls []badCall) {
	c.t.Helper()
	for _, bc := range calls {
		if e := c.fails(bc.method, bc.params...); !strings.HasPrefix(e, bc.prefix) {
			c.t.Errorf("%s%v: error %q, want prefix %q", bc.method, bc.params, e, bc.prefix)
		}
	}
}

// fails asserts a call is answered with a string error; it returns it.
func (c *testClient) fails(method string, params ...any) string {
	c.t.Helper()
	r := c.call(method, params...)
	s, ok := r.err.(string)
	if !ok || s == "" {
		c.t.Fatalf("%s%v: error %#v (result % x), want a string error", method, params, r.err, []byte(r.result))
	}
	if !bytes.Equal(r.result, []byte{0xc0}) {
		c.t.Fatalf("%s%v: error %q with result % x, want nil", method, params, s, []byte(r.result))
	}
	return s
}

// closed asserts the server closes the connection within 10 s.
func (c *testClient) closed() {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 256)
	for {
		_, err := c.conn.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatal("connection still open after 10 s")
		}
		if !errors.Is(err, io.EOF) && !isReset(err) {
			c.t.Fatalf("read: %v, want EOF", err)
		}
		return
	}
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe)
}

func (r response) str(t testing.TB) string {
	t.Helper()
	var s string
	if err := msgpack.Unmarshal(r.result, &s); err != nil {
		t.Fatalf("result % x is not a string: %v", []byte(r.result), err)
	}
	return s
}

func (r response) value(t testing.TB) any {
	t.Helper()
	v, err := msgpack.NewDecoder(bytes.NewReader(r.result)).DecodeInterface()
	if err != nil {
		t.Fatalf("result % x: %v", []byte(r.result), err)
	}
	return v
}

// delivery is a pulled message as the client decodes it.
type delivery struct {
	keys    []string
	Queue   string
	ID      string
	Type    string
	Retry   int64
	Content any
	raw     msgpack.RawMessage // content bytes
}

// delivery decodes a pull result, keeping the order of the keys.
func (r response) delivery(t testing.TB) delivery {
	t.Helper()
	dec := msgpack.NewDecoder(bytes.NewReader(r.result))
	n, err := dec.DecodeMapLen()
	if err != nil {
		t.Fatalf("pull result % x is not a map: %v", []byte(r.result), err)
	}
	var d delivery
	for range n {
		k, err := dec.DecodeString()
		if err != nil {
			t.Fatalf("key: %v", err)
		}
		d.keys = append(d.keys, k)
		switch k {
		case "queue":
			d.Queue, err = dec.DecodeString()
		case "id":
			d.ID, err = dec.DecodeString()
		case "type":
			d.Type, err = dec.DecodeString()
		case "retry":
			d.Retry, err = dec.DecodeInt64()
		case "content":
			if d.raw, err = dec.DecodeRaw(); err == nil {
				d.Content, err = msgpack.NewDecoder(bytes.NewReader(d.raw)).DecodeInterface()
			}
		default:
			err = dec.Skip()
		}
		if err != nil {
			t.Fatalf("value of %s: %v", k, err)
		}
	}
	want := []string{"queue", "id", "type", "retry", "content"}
	if len(d.keys) != len(want) {
		t.Fatalf("pull result keys %v, want %v", d.keys, want)
	}
	for i := range want {
		if d.keys[i] != want[i] {
			t.Fatalf("pull result keys %v, want %v", d.keys, want)
		}
	}
	return d
}
