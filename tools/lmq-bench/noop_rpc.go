package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/lmq-gateway/lmq-gateway/internal/mpack"
)

// noopRPCServer is the MessagePack-RPC ceiling: a server on a loopback port
// (in a child process of the bench by default, noop_proc.go), that answers the rpc target's requests in the shape
// the gateway gives (its default dialect, LMQ's raw strings) without doing
// anything: push answers "ok"; pull answers at once with a message of the
// cell's size (one body per size, built once, under a fixed id); done and
// delete answer "ok". It reads every request in full, as any real server
// must, and answers a connection's requests in order, flushing when no
// further request is already buffered (pipelined requests share a write).
type noopRPCServer struct {
	ln       net.Listener
	pullSize atomic.Int64
	// tail is the end of a pull answer for the current size: everything
	// after the queue name (keys id, type, retry and content with its body).
	tail atomic.Pointer[noopPullTail]

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

type noopPullTail struct {
	size int
	b    []byte
}

// noopRPCMaxParams bounds a request's params array, as the gateway does (no
// method takes more): a longer one is a protocol error.
const noopRPCMaxParams = 8

func newNoopRPCServer() (*noopRPCServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("noop-rpc listen: %w", err)
	}
	s := &noopRPCServer{ln: ln, conns: make(map[net.Conn]struct{})}
	s.pullSize.Store(256)
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

func (s *noopRPCServer) addr() string { return s.ln.Addr().String() }

func (s *noopRPCServer) acceptLoop() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			return
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(conn)
	}
}

// close stops accepting, closes every connection and waits for their
// goroutines.
func (s *noopRPCServer) close() error {
	s.mu.Lock()
	s.closed = true
	err := s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("noop-rpc close: %w", err)
	}
	return nil
}

// noopRequest is what the ceiling keeps of a request: its id, method and
// first argument when it is a string (the queue name).
type noopRequest struct {
	msgid  uint32
	method string
	name   string
}

func (s *noopRPCServer) serve(conn net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		conn.Close()
		s.wg.Done()
	}()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	bw := bufio.NewWriterSize(conn, 64<<10)
	// The decoder reads declared lengths in steps (its allocation limit),
	// so its memory follows the bytes received.
	dec := msgpack.NewDecoder(br)
	var req noopRequest
	var out []byte
	for {
		if err := readNoopRequest(dec, &req); err != nil {
			return // EOF, or not MessagePack-RPC: the connection ends
		}
		out = s.answer(out[:0], &req)
		if _, err := bw.Write(out); err != nil {
			return
		}
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return
			}
		}
	}
}

// readNoopRequest reads one request [0, msgid, method, params].
func readNoopRequest(dec *msgpack.Decoder, req *noopRequest) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != 4 {
		return fmt.Errorf("request array of %d elements", n)
	}
	typ, err := dec.DecodeUint64()
	if err != nil {
		return err
	}
	if typ != 0 {
		return fmt.Errorf("message type %d, not a request", typ)
	}
	if req.msgid, err = dec.DecodeUint32(); err != nil {
		return err
	}
	if req.method, err = dec.DecodeString(); err != nil {
		return err
	}
	np, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if np > noopRPCMaxParams {
		return fmt.Errorf("params array of %d elements", np)
	}
	req.name = ""
	for i := range np {
		if i == 0 {
			c, err := dec.PeekCode()
			if err != nil {
				return err
			}
			if msgpcode.IsString(c) || msgpcode.IsBin(c) {
				if req.name, err = dec.DecodeString(); err != nil {
					return err
				}
				continue
			}
		}
		if err := dec.Skip(); err != nil {
			return err
		}
	}
	return nil
}

// answer appends the response to req: [1, msgid, nil, result], or [1,
// msgid, error, nil] for a method the ceiling does not know.
func (s *noopRPCServer) answer(b []byte, req *noopRequest) []byte {
	b = append(b, 0x94, 0x01)
	b = mpack.AppendUint(b, uint64(req.msgid))
	switch req.method {
	case "push", "done", "delete":
		// A plain push answers "ok" (not an accumulating queue); done and
		// delete answer "ok".
		return appendRawStr(append(b, 0xc0), "ok")
	case "pull":
		b = append(b, 0xc0)
		b = append(b, 0x85) // map of 5: queue, id, type, retry, content
		b = appendRawStr(b, "queue")
		b = appendRawStr(b, req.name)
		return append(b, s.pullTail()...)
	}
	b = appendRawStr(b, "undef: "+req.method)
	return append(b, 0xc0)
}

// pullTail is the end of a pull answer for the current size, built once per
// size and shared: the server must not cost more than a real one would.
func (s *noopRPCServer) pullTail() []byte {
	size := int(s.pullSize.Load())
	if t := s.tail.Load(); t != nil && t.size == size {
		return t.b
	}
	var b []byte
	b = appendRawStr(b, "id")
	b = appendRawStr(b, noopMessageID)
	b = appendRawStr(b, "type")
	b = appendRawStr(b, "normal")
	b = appendRawStr(b, "retry")
	b = append(b, 0x02) // retries remaining, as noop-http says
	b = appendRawStr(b, "content")
	// Content pushed over RPC comes back as binary: raw in LMQ's dialect.
	b = mpack.AppendStrHeader(b, size, false)
	b = append(b, bytes.Repeat([]byte{'x'}, size)...)
	s.tail.Store(&noopPullTail{size: size, b: b})
	return b
}

func appendRawStr(b []byte, s string) []byte {
	return append(mpack.AppendStrHeader(b, len(s), false), s...)
}

// newNoopRPCTarget starts the ceiling and returns the rpc target's client
// code pointed at it.
func newNoopRPCTarget(depth int) (*rpcTarget, error) {
	s, err := newNoopRPCServer()
	if err != nil {
		return nil, err
	}
	return &rpcTarget{label: tNoopRPC, addr: s.addr(), dep: depth, noop: s, ceiling: ceiling{size: &s.pullSize}}, nil
}

// newChildNoopRPCTarget drives the RPC ceiling of the child process p.
func newChildNoopRPCTarget(p *noopProc, depth int) *rpcTarget {
	return &rpcTarget{label: tNoopRPC, addr: p.rpcAddr, dep: depth, ceiling: ceiling{child: p}}
}
