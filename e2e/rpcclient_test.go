package e2e

// A MessagePack-RPC client for the e2e tests, written from the MessagePack
// and MessagePack-RPC specifications and independent of the server's codec
// (package rpc): a test that shared the server's encoder and decoder would
// not notice when both were wrong in the same way.
//
// The decoder keeps map pairs in wire order (mpMap), tells str from bin
// ([]byte), and records the format byte of every object it read, so tests can
// check the dialect of an answer (LMQ's raw dialect never uses str8 0xd9 or
// bin 0xc4-0xc6) and the key order of a pulled message.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"
)

// mpMap is a decoded MessagePack map, pairs in wire order.
type mpMap []mpPair

type mpPair struct {
	Key, Val any
}

// get returns the value of the first pair whose key is the string k (str or
// bin on the wire).
func (m mpMap) get(k string) (any, bool) {
	for _, p := range m {
		if s, ok := mpString(p.Key); ok && s == k {
			return p.Val, true
		}
	}
	return nil, false
}

// keys returns the keys in wire order, as strings where they are strings.
func (m mpMap) keys() []string {
	out := make([]string, len(m))
	for i, p := range m {
		if s, ok := mpString(p.Key); ok {
			out[i] = s
		} else {
			out[i] = fmt.Sprint(p.Key)
		}
	}
	return out
}

// mpRaw is an already encoded MessagePack object, written as is.
type mpRaw []byte

// mpExt is an extension value.
type mpExt struct {
	Type int8
	Data []byte
}

// mpString returns v as a string if it is a str or bin.
func mpString(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), true
	}
	return "", false
}

// mpNormalize turns a decoded value into plain Go values for comparison:
// maps into map[string]any (keys stringified), bin into string (LMQ's raw
// dialect cannot tell strings from binaries), integers into int64 or, beyond
// its range, uint64.
func mpNormalize(v any) any {
	return mpMapLeaves(v, func(v any) any {
		switch v := v.(type) {
		case []byte:
			return string(v)
		case int, int8, int16, int32:
			return reflect.ValueOf(v).Int()
		case uint8, uint16, uint32:
			return int64(reflect.ValueOf(v).Uint())
		case uint64:
			if v <= math.MaxInt64 {
				return int64(v)
			}
		case mpMap:
			out := make(map[string]any, len(v))
			for _, p := range v {
				k, ok := mpString(p.Key)
				if !ok {
					k = fmt.Sprint(p.Key)
				}
				out[k] = mpNormalize(p.Val)
			}
			return out
		}
		return v
	})
}

// mpMapLeaves rebuilds v's arrays and string-keyed maps with f applied to
// every value in them that is neither.
func mpMapLeaves(v any, f func(any) any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = mpMapLeaves(e, f)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = mpMapLeaves(e, f)
		}
		return out
	}
	return f(v)
}

// ---- encoding ----

// mpEncoder appends MessagePack. With current false it writes LMQ's raw
// dialect (strings and binaries as fixstr/str16/str32); with current true the
// 2013 one (str8 for strings of 32-255 bytes, bin8/16/32 for []byte).
type mpEncoder struct {
	current bool
}

func (e mpEncoder) encode(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, 0xc0)
	case bool:
		if v {
			return append(b, 0xc3)
		}
		return append(b, 0xc2)
	case int:
		return mpAppendInt(b, int64(v))
	case int64:
		return mpAppendInt(b, v)
	case uint32:
		return mpAppendUint(b, uint64(v))
	case uint64:
		return mpAppendUint(b, v)
	case float64:
		b = append(b, 0xcb)
		return binary.BigEndian.AppendUint64(b, math.Float64bits(v))
	case float32:
		b = append(b, 0xca)
		return binary.BigEndian.AppendUint32(b, math.Float32bits(v))
	case string:
		return e.appendStr(b, v)
	case []byte:
		if !e.current {
			return e.appendStr(b, string(v))
		}
		return append(mpAppendSized(b, len(v), 0xc4), v...)
	case mpRaw:
		return append(b, v...)
	case []any:
		b = mpAppendArrayHeader(b, len(v))
		for _, x := range v {
			b = e.encode(b, x)
		}
		return b
	case mpMap:
		b = mpAppendMapHeader(b, len(v))
		for _, p := range v {
			b = e.encode(b, p.Key)
			b = e.encode(b, p.Val)
		}
		return b
	case map[string]any:
		// Sorted, so that a frame is reproducible.
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = mpAppendMapHeader(b, len(v))
		for _, k := range keys {
			b = e.appendStr(b, k)
			b = e.encode(b, v[k])
		}
		return b
	}
	panic(fmt.Sprintf("mpEncoder: cannot encode %T", v))
}

func (e mpEncoder) appendStr(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8 && !e.current:
		// LMQ's raw dialect has no str8: raw16.
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = mpAppendSized(b, n, 0xd9)
	}
	return append(b, s...)
}

// mpAppendSized appends the header of a str or bin of n bytes in the
// smallest of its three sized formats: code8 (8-bit length) and the two
// after it (16 and 32 bits).
func mpAppendSized(b []byte, n int, code8 byte) []byte {
	switch {
	case n <= math.MaxUint8:
		return append(b, code8, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, code8+1), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, code8+2), uint32(n))
}

func mpAppendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return mpAppendUint(b, uint64(v))
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

func mpAppendUint(b []byte, v uint64) []byte {
	switch {
	case v < 128:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}

func mpAppendArrayHeader(b []byte, n int) []byte { return mpAppendCount(b, n, 0x90, 0xdc) }
func mpAppendMapHeader(b []byte, n int) []byte   { return mpAppendCount(b, n, 0x80, 0xde) }

// mpAppendCount appends the header of an array or a map of n elements,
// whose formats are alike: fix holds a count below 16 in its low bits,
// code16 is the format with a 16-bit count, the next one has a 32-bit count.
func mpAppendCount(b []byte, n int, fix, code16 byte) []byte {
	switch {
	case n < 16:
		return append(b, fix|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, code16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, code16+1), uint32(n))
}

// rpcRequestFrame encodes [0, msgid, method, params].
func rpcRequestFrame(e mpEncoder, msgid uint32, method string, params []any) []byte {
	if params == nil {
		params = []any{}
	}
	b := mpAppendArrayHeader(nil, 4)
	b = append(b, 0x00)
	b = mpAppendUint(b, uint64(msgid))
	b = e.appendStr(b, method)
	return e.encode(b, params)
}

// ---- decoding ----

// mpDecoder reads MessagePack objects from a stream.
type mpDecoder struct {
	r *bufio.Reader
	// Per object (reset by decode): its bytes and the format byte of every
	// object in it, outermost first.
	raw     []byte
	formats []byte
}

// mpMaxDepth bounds nesting in answers; the server never nests deeper than
// the requests of these tests.
const mpMaxDepth = 100

// errMPDepth is returned for answers nested deeper than mpMaxDepth.
var errMPDepth = errors.New("msgpack: nested too deeply")

func newMPDecoder(r io.Reader) *mpDecoder {
	return &mpDecoder{r: bufio.NewReaderSize(r, 64<<10)}
}

// mpDecode decodes exactly one object from b.
func mpDecode(b []byte) (any, []byte, error) {
	d := newMPDecoder(bytes.NewReader(b))
	v, err := d.decode()
	if err != nil {
		return nil, nil, err
	}
	if len(d.raw) != len(b) {
		return nil, nil, fmt.Errorf("msgpack: %d trailing bytes", len(b)-len(d.raw))
	}
	return v, d.formats, nil
}

// decode reads one whole object.
func (d *mpDecoder) decode() (any, error) {
	d.raw, d.formats = d.raw[:0:0], d.formats[:0:0]
	return d.value(0)
}

func (d *mpDecoder) read(n int) ([]byte, error) {
	if n > 256<<20 {
		return nil, fmt.Errorf("msgpack: declared length %d", n)
	}
	start := len(d.raw)
	d.raw = append(d.raw, make([]byte, n)...)
	if _, err := io.ReadFull(d.r, d.raw[start:]); err != nil {
		if errors.Is(err, io.EOF) && start > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return d.raw[start:], nil
}

func (d *mpDecoder) uint(n int) (uint64, error) {
	b, err := d.read(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v, nil
}

func (d *mpDecoder) value(depth int) (any, error) {
	if depth > mpMaxDepth {
		return nil, errMPDepth
	}
	h, err := d.read(1)
	if err != nil {
		return nil, err
	}
	f := h[0]
	d.formats = append(d.formats, f)
	switch {
	case f <= 0x7f:
		return int64(f), nil
	case f >= 0xe0:
		return int64(int8(f)), nil
	case f&0xf0 == 0x80:
		return d.mapBody(int(f&0x0f), depth)
	case f&0xf0 == 0x90:
		return d.arrayBody(int(f&0x0f), depth)
	case f&0xe0 == 0xa0:
		return d.str(int(f & 0x1f))
	}
	switch f {
	case 0xc0:
		return nil, nil
	case 0xc2:
		return false, nil
	case 0xc3:
		return true, nil
	case 0xc4, 0xc5, 0xc6:
		n, err := d.uint(1 << (f - 0xc4))
		if err != nil {
			return nil, err
		}
		b, err := d.read(int(n))
		if err != nil {
			return nil, err
		}
		return bytes.Clone(b), nil
	case 0xc7, 0xc8, 0xc9:
		n, err := d.uint(1 << (f - 0xc7))
		if err != nil {
			return nil, err
		}
		return d.ext(int(n))
	case 0xca:
		v, err := d.uint(4)
		return float64(math.Float32frombits(uint32(v))), err
	case 0xcb:
		v, err := d.uint(8)
		return math.Float64frombits(v), err
	case 0xcc, 0xcd, 0xce, 0xcf:
		v, err := d.uint(1 << (f - 0xcc))
		if err != nil {
			return nil, err
		}
		if v <= math.MaxInt64 {
			return int64(v), nil
		}
		return v, nil
	case 0xd0, 0xd1, 0xd2, 0xd3:
		n := 1 << (f - 0xd0)
		v, err := d.uint(n)
		if err != nil {
			return nil, err
		}
		shift := 64 - 8*n // sign-extend
		return int64(v<<shift) >> shift, nil
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		return d.ext(1 << (f - 0xd4))
	case 0xd9, 0xda, 0xdb:
		n, err := d.uint(1 << (f - 0xd9))
		if err != nil {
			return nil, err
		}
		return d.str(int(n))
	case 0xdc, 0xdd:
		n, err := d.uint(2 << (f - 0xdc))
		if err != nil {
			return nil, err
		}
		return d.arrayBody(int(n), depth)
	case 0xde, 0xdf:
		n, err := d.uint(2 << (f - 0xde))
		if err != nil {
			return nil, err
		}
		return d.mapBody(int(n), depth)
	}
	return nil, fmt.Errorf("msgpack: format byte 0x%02x is never used", f)
}

func (d *mpDecoder) str(n int) (any, error) {
	b, err := d.read(n)
	return string(b), err
}

func (d *mpDecoder) ext(n int) (any, error) {
	t, err := d.read(1)
	if err != nil {
		return nil, err
	}
	typ := int8(t[0])
	b, err := d.read(n)
	return mpExt{Type: typ, Data: bytes.Clone(b)}, err
}

func (d *mpDecoder) arrayBody(n, depth int) (any, error) {
	out := make([]any, 0, min(n, 1024))
	for range n {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (d *mpDecoder) mapBody(n, depth int) (any, error) {
	out := make(mpMap, 0, min(n, 1024))
	for range n {
		k, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, mpPair{Key: k, Val: v})
	}
	return out, nil
}

// mpNewDialect reports whether formats hold a str8 or bin header, which
// LMQ's raw dialect never writes.
func mpNewDialect(formats []byte) bool {
	for _, f := range formats {
		if f == 0xd9 || f >= 0xc4 && f <= 0xc6 {
			return true
		}
	}
	return false
}

// ---- the client ----

// rpcResponse is one answer [1, msgid, error, result].
type rpcResponse struct {
	MsgID  uint32
	Err    any // nil, or the error object (LMQ: a string)
	Result any
	// Frame is the answer as it came over the wire; Formats the format byte
	// of every object in it, in order.
	Frame   []byte
	Formats []byte
}

// ErrString returns the error as a string ("" for a success).
func (r rpcResponse) ErrString() string {
	if r.Err == nil {
		return ""
	}
	if s, ok := mpString(r.Err); ok {
		return s
	}
	return fmt.Sprint(r.Err)
}

// rpcClient is one MessagePack-RPC connection with many requests in flight,
// bound to a test for its Must* methods (use For in a subtest). Send, Call
// and Await may be used from any goroutine; the others only from the test's.
type rpcClient struct {
	t testing.TB
	*rpcConn
}

// For returns the client bound to another test (a subtest), sharing the
// connection.
func (c *rpcClient) For(t testing.TB) *rpcClient { return &rpcClient{t: t, rpcConn: c.rpcConn} }

// rpcConn is the connection shared by the rpcClients of one dialRPC.
type rpcConn struct {
	nc net.Conn
	// enc encodes requests (raw dialect unless changed before use).
	enc mpEncoder
	// newDialectOK accepts answers in the 2013 dialect; by default an answer
	// with str8 or bin is an error, since LMQ's clients cannot read it.
	newDialectOK bool

	wmu sync.Mutex // serialises writes

	mu      sync.Mutex
	nextID  uint32
	pending map[uint32]chan rpcResponse
	done    chan struct{} // closed when the reader stopped
	err     error         // why it stopped, valid after done
}

// dialRPC connects to a gateway's RPC port; the connection is closed when
// the test ends.
func dialRPC(t testing.TB, addr string) *rpcClient {
	t.Helper()
	nc, err := rpcDial(addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &rpcConn{nc: nc, pending: make(map[uint32]chan rpcResponse), done: make(chan struct{})}
	go c.readLoop()
	t.Cleanup(c.Close)
	return &rpcClient{t: t, rpcConn: c}
}

// Close closes the connection; pending calls fail.
func (c *rpcConn) Close() { c.nc.Close() }

func (c *rpcConn) readLoop() {
	d := newMPDecoder(c.nc)
	var err error
	for {
		var v any
		if v, err = d.decode(); err != nil {
			break
		}
		var resp rpcResponse
		if resp, err = rpcParseResponse(v); err != nil {
			break
		}
		resp.Frame, resp.Formats = bytes.Clone(d.raw), bytes.Clone(d.formats)
		c.mu.Lock()
		ch, ok := c.pending[resp.MsgID]
		delete(c.pending, resp.MsgID)
		c.mu.Unlock()
		if !ok {
			// An answer nobody waits for: a duplicate, or a msgid never sent.
			err = fmt.Errorf("answer with unexpected msgid %d: % x", resp.MsgID, resp.Frame)
			break
		}
		ch <- resp // buffered
	}
	c.mu.Lock()
	c.err = err
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
	c.mu.Unlock()
	close(c.done)
}

// rpcParseResponse checks the envelope of an answer.
func rpcParseResponse(v any) (rpcResponse, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 4 {
		return rpcResponse{}, fmt.Errorf("answer is not an array of 4: %#v", v)
	}
	if typ, ok := a[0].(int64); !ok || typ != 1 {
		return rpcResponse{}, fmt.Errorf("answer type %#v, want 1", a[0])
	}
	id, ok := a[1].(int64)
	if !ok || id < 0 || id > math.MaxUint32 {
		return rpcResponse{}, fmt.Errorf("answer msgid %#v", a[1])
	}
	resp := rpcResponse{MsgID: uint32(id), Err: a[2], Result: a[3]}
	if resp.Err != nil {
		if _, ok := resp.Err.(string); !ok {
			return resp, fmt.Errorf("error %#v is not a string (LMQ sent strings)", resp.Err)
		}
		if resp.Result != nil {
			return resp, fmt.Errorf("error %q with result %#v", resp.Err, resp.Result)
		}
	}
	return resp, nil
}

// register reserves a msgid and the channel its answer will come on.
func (c *rpcConn) register() (uint32, chan rpcResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
		return 0, nil, fmt.Errorf("rpc connection closed: %v", c.err)
	default:
	}
	c.nextID++
	id := c.nextID
	ch := make(chan rpcResponse, 1)
	c.pending[id] = ch
	return id, ch, nil
}

// WriteRaw writes bytes to the connection as they are.
func (c *rpcConn) WriteRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(requestTimeout))
	_, err := c.nc.Write(b)
	return err
}

// rpcCall is one request of a batch.
type rpcCall struct {
	Method string
	Params []any
}

// SendBatch writes all requests in one write (so that they are in flight
// together) and returns the channels their answers come on, in order. A
// channel is closed without a value if the connection ends first.
func (c *rpcConn) SendBatch(calls []rpcCall) ([]<-chan rpcResponse, error) {
	var buf []byte
	chans := make([]<-chan rpcResponse, len(calls))
	for i, call := range calls {
		id, ch, err := c.register()
		if err != nil {
			return nil, err
		}
		chans[i] = ch
		buf = append(buf, rpcRequestFrame(c.enc, id, call.Method, call.Params)...)
	}
	return chans, c.WriteRaw(buf)
}

// Send writes one request and returns its msgid and answer channel.
func (c *rpcConn) Send(method string, params ...any) (uint32, <-chan rpcResponse, error) {
	id, ch, err := c.register()
	if err != nil {
		return 0, nil, err
	}
	return id, ch, c.WriteRaw(rpcRequestFrame(c.enc, id, method, params))
}

// Await waits for an answer on ch, bounded by ctx, and checks its dialect.
func (c *rpcConn) Await(ctx context.Context, ch <-chan rpcResponse) (rpcResponse, error) {
	select {
	case r, ok := <-ch:
		if !ok {
			<-c.done
			return r, fmt.Errorf("rpc connection ended before the answer: %v", c.err)
		}
		if !c.newDialectOK && mpNewDialect(r.Formats) {
			return r, fmt.Errorf("answer uses str8/bin, which LMQ's clients cannot read: % x", r.Frame[:min(len(r.Frame), 200)])
		}
		return r, nil
	case <-ctx.Done():
		return rpcResponse{}, ctx.Err()
	}
}

// Call sends a request and waits for its answer, bounded by ctx.
func (c *rpcConn) Call(ctx context.Context, method string, params ...any) (rpcResponse, error) {
	_, ch, err := c.Send(method, params...)
	if err != nil {
		return rpcResponse{}, err
	}
	return c.Await(ctx, ch)
}

// Do is Call bounded by requestTimeout; it fails the test on transport
// errors and returns the answer, successful or not.
func (c *rpcClient) Do(method string, params ...any) rpcResponse {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	r, err := c.Call(ctx, method, params...)
	if err != nil {
		c.t.Fatalf("rpc %s%s: %v", method, rpcShort(params), err)
	}
	return r
}

// Must calls a method and fails the test unless it succeeds; it returns the
// result.
func (c *rpcClient) Must(method string, params ...any) any {
	c.t.Helper()
	r := c.Do(method, params...)
	if r.Err != nil {
		c.t.Fatalf("rpc %s%s: error %q", method, rpcShort(params), r.ErrString())
	}
	return r.Result
}

// MustOK calls a method and fails the test unless it answers "ok".
func (c *rpcClient) MustOK(method string, params ...any) {
	c.t.Helper()
	if res := c.Must(method, params...); res != "ok" {
		c.t.Fatalf("rpc %s%s: result %s, want \"ok\"", method, rpcShort(params), rpcShort(res))
	}
}

// MustFail calls a method and fails the test unless it answers an error,
// which it returns.
func (c *rpcClient) MustFail(method string, params ...any) string {
	c.t.Helper()
	r := c.Do(method, params...)
	if r.Err == nil {
		c.t.Fatalf("rpc %s%s: result %s, want an error", method, rpcShort(params), rpcShort(r.Result))
	}
	return r.ErrString()
}

// rpcMessage is a pulled message.
type rpcMessage struct {
	Queue, ID, Type string
	Retry           int64
	Content         any
}

// rpcPulled checks that a pull result is LMQ's message map, with exactly the
// keys queue, id, type, retry, content in that order on the wire.
func rpcPulled(res any) (rpcMessage, error) {
	m, ok := res.(mpMap)
	if !ok {
		return rpcMessage{}, fmt.Errorf("pull result %#v is not a map", res)
	}
	want := []string{"queue", "id", "type", "retry", "content"}
	if got := m.keys(); fmt.Sprint(got) != fmt.Sprint(want) {
		return rpcMessage{}, fmt.Errorf("pull result keys %q, want %q in that order", got, want)
	}
	var msg rpcMessage
	var okQ, okID, okT, okR bool
	msg.Queue, okQ = m[0].Val.(string)
	msg.ID, okID = m[1].Val.(string)
	msg.Type, okT = m[2].Val.(string)
	msg.Retry, okR = m[3].Val.(int64)
	msg.Content = m[4].Val
	if !okQ || !okID || !okT || !okR {
		return msg, fmt.Errorf("pull result has ill-typed fields: %#v", res)
	}
	if !uuidRE.MatchString(msg.ID) {
		return msg, fmt.Errorf("pull result id %q is not a UUID", msg.ID)
	}
	if msg.Type != "normal" && msg.Type != "package" {
		return msg, fmt.Errorf("pull result type %q", msg.Type)
	}
	return msg, nil
}

// MustPull calls pull (or pull_any) and fails unless a message came.
func (c *rpcClient) MustPull(method string, params ...any) rpcMessage {
	c.t.Helper()
	res := c.Must(method, params...)
	msg, err := rpcPulled(res)
	if err != nil {
		c.t.Fatalf("rpc %s%s: %v", method, rpcShort(params), err)
	}
	return msg
}

// MustEmpty calls pull (or pull_any) and fails unless it answers "empty".
func (c *rpcClient) MustEmpty(method string, params ...any) {
	c.t.Helper()
	if res := c.Must(method, params...); res != "empty" {
		c.t.Fatalf("rpc %s%s: result %s, want \"empty\"", method, rpcShort(params), rpcShort(res))
	}
}
