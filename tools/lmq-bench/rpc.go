package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// rpcTarget drives the MessagePack-RPC API at addr: the gateway's, or the
// no-op server of noop-rpc (the same client code either way).
type rpcTarget struct {
	label string
	addr  string
	dep   int
	noop  *noopRPCServer // the ceiling inside the bench (--noop-in-process)
	ceiling
}

func newRPCTarget(addr string, depth int) *rpcTarget {
	return &rpcTarget{label: tRPC, addr: addr, dep: depth}
}

func (t *rpcTarget) name() string { return t.label }
func (t *rpcTarget) depth() int   { return t.dep }

func (t *rpcTarget) close() error {
	if t.noop != nil {
		return t.noop.close()
	}
	return nil
}

func (t *rpcTarget) newClient(ctx context.Context) (client, error) {
	c, err := dialRPC(ctx, t.addr)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// setup and remove open a connection per call: they run outside the measured
// cells, and a short-lived connection keeps the target free of shared state.
func (t *rpcTarget) setup(ctx context.Context, queue string) error {
	if !t.stateful() {
		return nil // the ceiling keeps no queues
	}
	c, err := dialRPC(ctx, t.addr)
	if err != nil {
		return err
	}
	defer c.close()
	return createByPull(ctx, c, queue)
}

func (t *rpcTarget) remove(ctx context.Context, queue string) error {
	if !t.stateful() {
		return nil
	}
	c, err := dialRPC(ctx, t.addr)
	if err != nil {
		return err
	}
	defer c.close()
	res, err := c.call(ctx, "delete", func(e *msgpack.Encoder) error {
		if err := e.EncodeArrayLen(1); err != nil {
			return err
		}
		return e.EncodeString(queue)
	})
	if err != nil {
		// Deleting a queue that is already gone is not a failure here.
		var re *rpcError
		if errors.As(err, &re) {
			return nil
		}
		return fmt.Errorf("delete %s: %w", queue, err)
	}
	if res.str != "ok" {
		return fmt.Errorf("delete %s: unexpected result %q", queue, res.str)
	}
	return nil
}

// rpcConn is a minimal MessagePack-RPC client: requests [0, msgid, method,
// params] are written under a lock, and a reader goroutine matches responses
// [1, msgid, error, result] to their callers, so any number of requests may
// be in flight on the connection.
type rpcConn struct {
	conn net.Conn

	wmu    sync.Mutex
	w      *bufio.Writer
	enc    *msgpack.Encoder
	nextID uint32

	mu      sync.Mutex
	pending map[uint32]chan rpcResult
	broken  error // set once the reader stops; later calls fail with it

	readerDone chan struct{}
}

// rpcResult is the decoded part of a response the bench needs: a string
// result ("ok", "empty"), or a message map's id and content.
type rpcResult struct {
	err     error
	str     string
	isMsg   bool
	id      string
	content []byte
}

// rpcError is an error response of the server (as opposed to a broken
// connection).
type rpcError struct {
	method string
	msg    string
}

func (e *rpcError) Error() string { return fmt.Sprintf("rpc %s: server error %s", e.method, e.msg) }

func dialRPC(ctx context.Context, addr string) (*rpcConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rpc dial %s: %w", addr, err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		// Small requests must not wait for Nagle: latency is what we measure.
		_ = tc.SetNoDelay(true)
	}
	w := bufio.NewWriterSize(conn, 64<<10)
	c := &rpcConn{
		conn:       conn,
		w:          w,
		enc:        msgpack.NewEncoder(w),
		pending:    make(map[uint32]chan rpcResult),
		readerDone: make(chan struct{}),
	}
	go c.readLoop()
	return c, nil
}

func (c *rpcConn) close() error {
	err := c.conn.Close()
	<-c.readerDone
	if err != nil {
		return fmt.Errorf("rpc close: %w", err)
	}
	return nil
}

// call sends one request whose params the caller encodes (array included),
// and waits for its response or ctx.
func (c *rpcConn) call(ctx context.Context, method string, params func(*msgpack.Encoder) error) (rpcResult, error) {
	ch := make(chan rpcResult, 1)
	c.wmu.Lock()
	c.nextID++
	id := c.nextID
	c.mu.Lock()
	if c.broken != nil {
		err := c.broken
		c.mu.Unlock()
		c.wmu.Unlock()
		return rpcResult{}, err
	}
	c.pending[id] = ch
	c.mu.Unlock()

	err := c.writeRequest(ctx, id, method, params)
	c.wmu.Unlock()
	if err != nil {
		c.forget(id)
		// A half-written frame poisons the stream: drop the connection.
		_ = c.conn.Close()
		return rpcResult{}, fmt.Errorf("rpc %s: write: %w", method, err)
	}

	select {
	case res := <-ch:
		if res.err != nil {
			var re *rpcError
			if errors.As(res.err, &re) {
				re.method = method
			}
			return res, res.err
		}
		return res, nil
	case <-ctx.Done():
		c.forget(id)
		return rpcResult{}, fmt.Errorf("rpc %s: %w", method, ctx.Err())
	}
}

// writeRequest is called with wmu held.
func (c *rpcConn) writeRequest(ctx context.Context, id uint32, method string, params func(*msgpack.Encoder) error) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.conn.SetWriteDeadline(dl)
	} else {
		_ = c.conn.SetWriteDeadline(time.Time{})
	}
	e := c.enc
	if err := e.EncodeArrayLen(4); err != nil {
		return err
	}
	if err := e.EncodeUint8(0); err != nil {
		return err
	}
	if err := e.EncodeUint32(id); err != nil {
		return err
	}
	if err := e.EncodeString(method); err != nil {
		return err
	}
	if err := params(e); err != nil {
		return err
	}
	// Flush per request: a pipelined caller must not wait for a later one.
	return c.w.Flush()
}

func (c *rpcConn) forget(id uint32) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *rpcConn) readLoop() {
	defer close(c.readerDone)
	dec := msgpack.NewDecoder(bufio.NewReaderSize(c.conn, 64<<10))
	var err error
	for {
		var id uint32
		var res rpcResult
		id, res, err = readResponse(dec)
		if err != nil {
			break
		}
		c.mu.Lock()
		ch, ok := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ok {
			ch <- res
		}
	}
	c.mu.Lock()
	c.broken = fmt.Errorf("rpc connection: %w", err)
	for id, ch := range c.pending {
		ch <- rpcResult{err: c.broken}
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

func readResponse(dec *msgpack.Decoder) (uint32, rpcResult, error) {
	var res rpcResult
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return 0, res, err
	}
	if n != 4 {
		return 0, res, fmt.Errorf("response array of %d elements", n)
	}
	typ, err := dec.DecodeInt()
	if err != nil {
		return 0, res, err
	}
	if typ != 1 {
		return 0, res, fmt.Errorf("message type %d, not a response", typ)
	}
	id, err := dec.DecodeUint32()
	if err != nil {
		return 0, res, err
	}
	code, err := dec.PeekCode()
	if err != nil {
		return 0, res, err
	}
	if code == msgpcode.Nil {
		if err := dec.DecodeNil(); err != nil {
			return 0, res, err
		}
	} else {
		v, err := dec.DecodeInterface()
		if err != nil {
			return 0, res, err
		}
		res.err = &rpcError{msg: fmt.Sprint(rawToString(v))}
	}
	if err := decodeResult(dec, &res); err != nil {
		return 0, res, err
	}
	return id, res, nil
}

// rawToString shows LMQ-dialect raw bytes as text in error messages.
func rawToString(v any) any {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return v
}

// decodeResult reads a string result, or a pull's message map; it keeps id
// and content and skips the rest. The gateway may answer strings as raw
// (LMQ's dialect, str types) or bin; DecodeString and DecodeBytes read both.
func decodeResult(dec *msgpack.Decoder, res *rpcResult) error {
	code, err := dec.PeekCode()
	if err != nil {
		return err
	}
	switch {
	case msgpcode.IsString(code) || msgpcode.IsBin(code):
		res.str, err = dec.DecodeString()
		return err
	case msgpcode.IsFixedMap(code) || code == msgpcode.Map16 || code == msgpcode.Map32:
		n, err := dec.DecodeMapLen()
		if err != nil {
			return err
		}
		res.isMsg = true
		for range n {
			key, err := dec.DecodeString()
			if err != nil {
				return err
			}
			switch key {
			case "id":
				if res.id, err = dec.DecodeString(); err != nil {
					return err
				}
			case "content":
				// Bytes pushed over RPC come back as bytes (raw or bin);
				// anything else is skipped (an empty body then).
				c, err := dec.PeekCode()
				if err != nil {
					return err
				}
				if msgpcode.IsString(c) || msgpcode.IsBin(c) {
					if res.content, err = dec.DecodeBytes(); err != nil {
						return err
					}
				} else if err := dec.Skip(); err != nil {
					return err
				}
			default:
				if err := dec.Skip(); err != nil {
					return err
				}
			}
		}
		return nil
	default:
		return dec.Skip()
	}
}

func (c *rpcConn) push(ctx context.Context, queue string, body []byte) error {
	res, err := c.call(ctx, "push", func(e *msgpack.Encoder) error {
		if err := e.EncodeArrayLen(2); err != nil {
			return err
		}
		if err := e.EncodeString(queue); err != nil {
			return err
		}
		return e.EncodeBytes(body)
	})
	if err != nil {
		return err
	}
	if res.str != "ok" {
		return fmt.Errorf("rpc push: unexpected result %q", res.str)
	}
	return nil
}

// pushGroup pushes into an ordered group of queue: push's third argument,
// the option map {"group": group}.
func (c *rpcConn) pushGroup(ctx context.Context, queue, group string, body []byte) error {
	res, err := c.call(ctx, "push", func(e *msgpack.Encoder) error {
		if err := e.EncodeArrayLen(3); err != nil {
			return err
		}
		if err := e.EncodeString(queue); err != nil {
			return err
		}
		if err := e.EncodeBytes(body); err != nil {
			return err
		}
		if err := e.EncodeMapLen(1); err != nil {
			return err
		}
		if err := e.EncodeString("group"); err != nil {
			return err
		}
		return e.EncodeString(group)
	})
	if err != nil {
		return err
	}
	if res.str != "ok" {
		return fmt.Errorf("rpc push: unexpected result %q", res.str)
	}
	return nil
}

func (c *rpcConn) pull(ctx context.Context, queue string, wait time.Duration) ([]byte, func(context.Context) error, error) {
	res, err := c.call(ctx, "pull", func(e *msgpack.Encoder) error {
		if err := e.EncodeArrayLen(2); err != nil {
			return err
		}
		if err := e.EncodeString(queue); err != nil {
			return err
		}
		return e.EncodeFloat64(wait.Seconds())
	})
	if err != nil {
		return nil, nil, err
	}
	if !res.isMsg {
		if res.str == "empty" {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("rpc pull: unexpected result %q", res.str)
	}
	if res.id == "" {
		return nil, nil, errors.New("rpc pull: message without id")
	}
	ack := func(ctx context.Context) error {
		r, err := c.call(ctx, "done", func(e *msgpack.Encoder) error {
			if err := e.EncodeArrayLen(2); err != nil {
				return err
			}
			if err := e.EncodeString(queue); err != nil {
				return err
			}
			return e.EncodeString(res.id)
		})
		if err != nil {
			return err
		}
		if r.str != "ok" {
			return fmt.Errorf("rpc done: unexpected result %q", r.str)
		}
		return nil
	}
	return res.content, ack, nil
}
