// Package rpc is lmq-gateway's MessagePack-RPC front end: LMQ's second API,
// used by its older clients, over TCP (port 18800 by default). It is a thin
// layer over the core (package gateway): it reads requests
// [0, msgid, method, params], calls the core, and answers
// [1, msgid, error, result], many requests in flight per connection.
//
// The wire itself (frames, the envelope, both MessagePack dialects and the
// bounds on what a frame may make the server hold) is package rpc/wire; this
// package holds the methods, the connections and what bounds their work.
// Answers are in LMQ's raw dialect unless told otherwise, so that client
// libraries older than the 2013 spec change keep working.
package rpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/connlimit"
	"github.com/lmq-gateway/lmq-gateway/internal/testsignal"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/rpc/wire"
)

// Core is what the front end needs of the core, one small interface per
// handle of the core (CoreOf makes it of a *gateway.Gateway).
type Core struct {
	Messages Messages
	Queues   Queues
	Inspect  Inspect
}

// CoreOf is the Core of gateway g's handles.
func CoreOf(g *gateway.Gateway) Core {
	return Core{Messages: g.Messages(), Queues: g.Queues(), Inspect: g.Inspect()}
}

// Messages is what the front end pushes, pulls and replies with
// (gateway.Messages); one that is also a binder binds deliveries to their
// connection.
type Messages interface {
	Push(ctx context.Context, queue string, msg gateway.Message) (gateway.AccumState, error)
	PushWith(ctx context.Context, queue string, msg gateway.Message, opts gateway.PushOptions) (gateway.AccumState, error)
	// PushAll and PullAny get a nil scope (every queue): the RPC server
	// has no tokens.
	PushAll(ctx context.Context, re *regexp.Regexp, msg gateway.Message, scope gateway.Scope) (map[string]gateway.AccumState, error)
	Pull(ctx context.Context, queue string, wait time.Duration) (*gateway.Delivery, error)
	PullAny(ctx context.Context, re *regexp.Regexp, wait time.Duration, scope gateway.Scope) (*gateway.Delivery, error)
	Abandon(ctx context.Context, d *gateway.Delivery)
	Reply(ctx context.Context, queue, id string, kind gateway.ReplyKind) error
}

// Queues is what the front end manages queues with (gateway.Queues).
type Queues interface {
	DeleteQueue(ctx context.Context, queue string) error
	UpdateProps(ctx context.Context, queue string, patch mapping.Props) error
	ResetProps(ctx context.Context, queue string) error
	DefaultProps(ctx context.Context) (mapping.DefaultList, error)
	SetDefaultProps(ctx context.Context, list mapping.DefaultList) error
	// Purge removes a queue's waiting messages (beyond LMQ, purge.go).
	Purge(ctx context.Context, queue string) error
}

// Inspect is what the front end looks into queues with (gateway.Inspect).
type Inspect interface {
	// Beyond LMQ: a queue's waiting messages by id (messages.go).
	Messages(ctx context.Context, queue string, n int, withBody bool) ([]gateway.Peeked, error)
	DeleteMessage(ctx context.Context, queue string, seq uint64) error
	MoveMessage(ctx context.Context, queue string, seq uint64, target string) error
}

var (
	_ Messages = (*gateway.Messages)(nil)
	_ Queues   = (*gateway.Queues)(nil)
	_ Inspect  = (*gateway.Inspect)(nil)
)

// binder is the part of a core that binds deliveries to the connection that
// received them (the queue property release_on_disconnect, connbound.go).
// *gateway.Messages has it; a core without it has no bound deliveries.
type binder interface {
	NewBound() *gateway.Bound
}

var _ binder = (*gateway.Messages)(nil)

// Options configure a Server. The zero value is usable.
type Options struct {
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
	// Dialect of the answers; wire.DialectRaw (LMQ's) by default.
	Dialect wire.Dialect
	// Limits on request frames.
	Limits wire.Limits
	// MaxInFlight bounds the requests of one connection being handled at once
	// (default 1024). When reached, the server stops reading from that
	// connection until one finishes, so TCP pushes back on the client.
	MaxInFlight int
	// MaxInFlightBytes bounds the request bytes of one connection held at once
	// (default 2 × Limits.MaxFrameSize).
	MaxInFlightBytes int
	// WriteTimeout bounds writing one batch of answers to a client that does
	// not read them (default 30 s); when it passes the connection is closed.
	WriteTimeout time.Duration
	// MaxTotalInFlightBytes bounds the request bytes held at once across all
	// connections (0: no bound beyond MaxInFlightBytes per connection). When
	// reached, no connection reads a new request until answered ones release
	// their bytes; see sharedBytes for how far the peak may exceed it.
	MaxTotalInFlightBytes int
	// MaxConns bounds the connections served at once (0: no bound). At the
	// bound, one newcomer is accepted and waits while the connection idle
	// the longest (no request being read or served, no answer pending) is
	// closed to make room (idle.go); with none idle, it waits until one
	// closes. Further newcomers wait in the kernel's accept queue.
	MaxConns int
	// RequestTimeout bounds the time a request frame may take to arrive once
	// its first byte has come (default 30 s; negative: no bound). A client
	// that starts a request and stalls is disconnected, so that stalled
	// connections cannot hold the connection slots.
	RequestTimeout time.Duration
	// MaxAnswerBytes bounds the answer bytes of one connection waiting to be
	// written (default 4 MiB; negative: no bound). At the bound the server
	// stops reading the connection's requests and its pulls stop taking
	// messages; if the answers do not drain below it within WriteTimeout the
	// connection is closed (its undelivered messages go back to their
	// queues). One answer larger than the bound is still written alone.
	// Pulls take messages only while their answers, counted at the size of
	// the connection's recent answers (256 KiB until there are some), fit
	// beside the pending ones: 16 at once at first with the default.
	// Listings (get_default_props, messages) are served one at a time per
	// connection, each counted at the size of the recent ones before its
	// answer is built, here and in MaxTotalAnswerBytes.
	MaxAnswerBytes int
	// MaxTotalAnswerBytes bounds the answer bytes waiting to be written
	// across all connections (default 256 MiB; negative: no bound); at the
	// bound no connection reads a new request until answers are written or
	// their connections closed, and pulls take no message.
	MaxTotalAnswerBytes int
}

// Defaults of Options.
const (
	DefaultMaxInFlight     = 1024
	DefaultWriteTimeout    = 30 * time.Second
	DefaultRequestTimeout  = 30 * time.Second
	DefaultMaxAnswerBytes  = 4 << 20
	DefaultMaxTotalAnswers = 256 << 20
)

var (
	// errRequestTimeout: a request's bytes stopped coming (RequestTimeout).
	errRequestTimeout = errors.New("request did not arrive in time")
	// errSlowReader: the client did not read its answers (MaxAnswerBytes).
	errSlowReader = errors.New("answers not read in time")
)

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("rpc: server closed")

// Server serves MessagePack-RPC. Create it with New; it is safe for concurrent
// use, and Serve may be called with several listeners.
type Server struct {
	core Core
	opt  Options
	log  *slog.Logger

	// drainCtx is cancelled when Shutdown starts: waiting pulls answer "empty".
	drainCtx context.Context
	drain    context.CancelFunc

	// total is the server-wide budget of request bytes (nil: none);
	// answers the server-wide count of answer bytes not yet written.
	total   *sharedBytes
	answers *sharedBytes
	// The sizes the listings' answers are counted at before they are
	// built (outbox.reserve): get_default_props, messages without and
	// with bodies.
	defaultsEst, messagesEst, messagesBodyEst estimate

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	connWG    sync.WaitGroup
	// gone is signalled (on mu) when a connection ends or the server
	// closes: a newcomer waiting for a slot looks again (idle.go).
	gone *sync.Cond

	// TestRequestWaits reports, to a test that turned it on
	// (internal/testsignal), each request whose rest the server must wait
	// for on the socket: it read what had come and arms the request's
	// deadline (deadlineReader).
	TestRequestWaits testsignal.Signal[struct{}]
}

// New returns a Server answering with core.
func New(core Core, opt Options) *Server {
	opt.Limits = opt.Limits.WithDefaults()
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.MaxInFlight <= 0 {
		opt.MaxInFlight = DefaultMaxInFlight
	}
	if opt.MaxInFlightBytes <= 0 {
		opt.MaxInFlightBytes = 2 * opt.Limits.MaxFrameSize
	}
	if opt.WriteTimeout <= 0 {
		opt.WriteTimeout = DefaultWriteTimeout
	}
	if opt.RequestTimeout == 0 {
		opt.RequestTimeout = DefaultRequestTimeout
	}
	// For the answer bounds 0 is the default and a negative value none
	// (the command line's 0 "no limit" arrives as -1).
	if opt.MaxAnswerBytes == 0 {
		opt.MaxAnswerBytes = DefaultMaxAnswerBytes
	}
	if opt.MaxTotalAnswerBytes == 0 {
		opt.MaxTotalAnswerBytes = DefaultMaxTotalAnswers
	}
	drainCtx, drain := context.WithCancel(context.Background())
	s := &Server{
		core:      core,
		opt:       opt,
		log:       opt.Logger,
		drainCtx:  drainCtx,
		drain:     drain,
		total:     newSharedBytes(opt.MaxTotalInFlightBytes),
		answers:   newSharedBytes(opt.MaxTotalAnswerBytes),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
	}
	s.gone = sync.NewCond(&s.mu)
	return s
}

// Options returns the options in effect: those given to New with its
// defaults filled in (a negative bound: none).
func (s *Server) Options() Options { return s.opt }

// Serve accepts connections on l until Shutdown (then it returns
// ErrServerClosed) or until ctx ends (then it closes l and the connections it
// accepted, and returns ctx.Err()). It always closes l.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	// One more than MaxConns: the newcomer that waits for an idle
	// connection to be reclaimed (idle.go).
	if s.opt.MaxConns > 0 {
		l = connlimit.Listen(l, s.opt.MaxConns+1)
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()
	// Accept does not take a context: closing the listener is what stops it.
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()

	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if s.isClosed() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Out of file descriptors and the like: wait, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("rpc accept", "err", err, "retry_in", backoff)
				select {
				case <-time.After(backoff):
					continue
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return fmt.Errorf("rpc accept: %w", err)
		}
		backoff = 0
		s.startConn(ctx, nc)
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Shutdown stops accepting, makes waiting pulls answer "empty", stops reading
// new requests, and waits until the requests in flight are answered and every
// connection is closed, or until ctx ends (then it closes what is left and
// returns ctx.Err()).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.gone.Broadcast()
	for l := range s.listeners {
		l.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()

	s.drain()
	for _, c := range conns {
		// Wakes the reader blocked in Read; it then stops taking requests.
		c.wakeReader()
	}

	done := make(chan struct{})
	go func() {
		s.connWG.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.abort()
		}
		s.mu.Unlock()
		return ctx.Err()
	}
}

func (s *Server) startConn(ctx context.Context, nc net.Conn) {
	c := newConn(ctx, s, nc)
	s.mu.Lock()
	if !s.makeRoomLocked(ctx) {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.connWG.Done()
		c.serve()
		s.mu.Lock()
		delete(s.conns, c)
		s.gone.Broadcast()
		s.mu.Unlock()
	}()
}

// conn is one client connection: a reader goroutine (serve) that hands each
// request to a worker goroutine of the connection; each worker writes its
// answer through the outbox, which serializes them.
//
// A worker that finished its request waits for the next one (up to
// maxIdleWorkers of them per connection do) instead of ending: a client with
// one request at a time is then served by the same goroutine throughout,
// whose stack has grown to what serving takes, rather than by a new one per
// request that grows its stack again (runtime.newstack was 9.9% of the CPU
// of a closed push loop, 4.4% of a pull+ack one). An idle connection thus
// keeps up to maxIdleWorkers goroutines besides its reader (one for a client
// that sends one request at a time), bounded with --max-rpc-conns.
type conn struct {
	s   *Server
	nc  net.Conn
	log *slog.Logger

	// ctx ends when the connection is torn down (malformed input, write
	// failure, Serve's context); every core call uses it.
	ctx    context.Context
	cancel context.CancelFunc
	// waitCtx also ends when the client stops sending (EOF) or the server
	// drains: blocking pulls wait on it.
	waitCtx    context.Context
	cancelWait context.CancelFunc
	stopDrain  func() bool

	// clientGone is set when reading stopped for a reason other than a drain.
	clientGone atomic.Bool

	// busy counts a request being read and the requests being served;
	// lastUsed (unix nanoseconds) is when it last dropped to 0 (idle.go).
	busy      atomic.Int32
	lastUsed  atomic.Int64
	reclaimed bool // picked to make room; s.mu

	// dlMu orders the reader's deadlines with wakeReader's: once stopping,
	// the reader's deadline stays in the past.
	dlMu     sync.Mutex
	stopping bool

	out      *outbox
	handlers sync.WaitGroup // requests being served
	budget   *budget
	// work hands a request to an idle worker; idle counts those waiting on
	// it, workers all of them (waited for by serve).
	work    chan job
	idle    atomic.Int32
	workers sync.WaitGroup

	// bound holds the deliveries of release_on_disconnect queues handed
	// out here and not answered yet; nil until the first (connbound.go).
	boundMu sync.Mutex
	bound   *gateway.Bound
}

func newConn(ctx context.Context, s *Server, nc net.Conn) *conn {
	c := &conn{
		s:      s,
		nc:     nc,
		log:    s.log.With("remote", nc.RemoteAddr().String()),
		budget: newBudget(s.opt.MaxInFlight, s.opt.MaxInFlightBytes),
		work:   make(chan job),
	}
	c.out = newOutbox(nc, s.opt.WriteTimeout, func(err error) {
		if c.ctx.Err() == nil {
			c.log.Debug("rpc write failed, closing connection", "err", err)
			c.abort()
		}
	})
	c.out.bound(s.opt.MaxAnswerBytes, s.answers)
	c.lastUsed.Store(time.Now().UnixNano())
	// The deliveries it pulls record who has them (the console's in-flight list).
	c.ctx, c.cancel = context.WithCancel(gateway.WithClient(ctx, gateway.ClientRPC, nc.RemoteAddr().String()))
	c.waitCtx, c.cancelWait = context.WithCancel(c.ctx)
	c.stopDrain = context.AfterFunc(s.drainCtx, c.cancelWait)
	return c
}

// abort tears the connection down at once.
func (c *conn) abort() {
	c.cancel()
	c.nc.Close()
}

func (c *conn) serve() {
	c.log.Debug("rpc connection open")
	defer c.stopDrain()
	// Serve's context ending closes the socket so the reader wakes up.
	stop := context.AfterFunc(c.ctx, func() { c.nc.Close() })
	defer stop()

	err := c.readLoop()
	if c.s.drainCtx.Err() == nil {
		// Reading stopped because of the client (it left, or sent garbage):
		// whatever it is handed now can never be acked on this connection.
		c.clientGone.Store(true)
	}
	switch {
	case err == nil, errors.Is(err, io.EOF):
		c.log.Debug("rpc connection closed by client")
	case c.waitCtx.Err() != nil:
		// Shutdown or teardown already under way: the read error is its echo.
	case errors.Is(err, wire.ErrMalformed), errors.Is(err, wire.ErrTooLarge), errors.Is(err, wire.ErrTooDeep),
		errors.Is(err, wire.ErrNotRPC):
		c.log.Warn("rpc closing connection on bad frame", "err", err)
		c.abort()
	case errors.Is(err, errRequestTimeout), errors.Is(err, errSlowReader):
		c.log.Warn("rpc closing connection", "err", err)
		c.abort()
	default:
		c.log.Debug("rpc connection read ended", "err", err)
	}
	// No more requests: waiting pulls stop waiting (their clients are gone or
	// the server is draining); the others finish and are answered.
	c.cancelWait()
	// Handlers write their answers themselves (outbox): once they are
	// done, everything answered has been written.
	c.handlers.Wait()
	// Idle workers end with waitCtx.
	c.workers.Wait()
	c.nc.Close()
	c.cancel()
	c.releaseBound()
}

func (c *conn) readLoop() error {
	dr := &deadlineReader{c: c}
	br := bufio.NewReaderSize(dr, 64<<10)
	fr := wire.NewFrameReader(br, c.s.opt.Limits)
	for {
		// With the server-wide budget spent, stop reading (TCP then pushes
		// back on the client) until answered requests release bytes.
		if err := c.s.total.waitRoom(c.waitCtx); err != nil {
			return nil
		}
		// The same while the answers not yet written are at their bounds;
		// this connection's own must drain within WriteTimeout.
		if err := c.out.awaitRoom(c.waitCtx, c.s.opt.WriteTimeout); err != nil {
			if errors.Is(err, errSlowReader) {
				return fmt.Errorf("%w: %d bytes of answers waiting for %v", errSlowReader, c.s.opt.MaxAnswerBytes, c.s.opt.WriteTimeout)
			}
			return nil
		}
		if err := c.s.answers.waitRoom(c.waitCtx); err != nil {
			return nil
		}
		frame, err := c.readFrame(br, fr, dr)
		if err != nil {
			return err
		}
		held := len(frame)
		c.s.total.charge(held)
		// Frames already buffered when a drain starts are not taken.
		if c.waitCtx.Err() != nil {
			c.s.total.release(held)
			return nil
		}
		req, err := wire.ParseRequest(frame, c.s.opt.Limits)
		if err != nil {
			c.s.total.release(held)
			return err
		}
		if req.Notification {
			c.s.total.release(held)
			continue // accepted and ignored, as MessagePack-RPC allows
		}
		cost := min(len(frame), c.s.opt.MaxInFlightBytes)
		if err := c.budget.acquire(c.waitCtx, cost); err != nil {
			c.s.total.release(held)
			return nil
		}
		if isListing(req.Method) {
			// One listing at a time, and only while the answers pending
			// are below the bound (those served since the check above
			// count too): the next waits here, unread (outbox).
			err := c.out.startListing(c.waitCtx)
			if err == nil {
				if err = c.out.awaitRoom(c.waitCtx, c.s.opt.WriteTimeout); err != nil {
					c.out.endListing()
				}
			}
			if err != nil {
				c.budget.release(cost)
				c.s.total.release(held)
				if errors.Is(err, errSlowReader) {
					return fmt.Errorf("%w: %d bytes of answers waiting for %v", errSlowReader, c.s.opt.MaxAnswerBytes, c.s.opt.WriteTimeout)
				}
				return nil
			}
		}
		c.handlers.Add(1)
		c.busy.Add(1)
		j := job{req: req, held: held, cost: cost}
		select {
		case c.work <- j:
		default:
			c.workers.Add(1)
			go c.worker(j)
		}
	}
}

// maxIdleWorkers bounds the workers of a connection that wait for its next
// request; more than that end after their request.
const maxIdleWorkers = 4

// job is a request read, with what its reading charged.
type job struct {
	req        wire.Request
	held, cost int
}

// worker serves j, then further requests while it is among the
// connection's maxIdleWorkers idle ones and the connection takes requests.
func (c *conn) worker(j job) {
	defer c.workers.Done()
	for {
		c.serveJob(j)
		if c.idle.Add(1) > maxIdleWorkers {
			c.idle.Add(-1)
			return
		}
		select {
		case j = <-c.work:
			c.idle.Add(-1)
		case <-c.waitCtx.Done():
			c.idle.Add(-1)
			return
		}
	}
}

func (c *conn) serveJob(j job) {
	defer c.handlers.Done()
	defer c.done()
	defer c.s.total.release(j.held)
	defer c.budget.release(j.cost)
	c.handle(j.req)
}

// readFrame reads one request frame: it waits for the first byte as long as
// it takes (an idle connection), then gives the rest RequestTimeout.
func (c *conn) readFrame(br *bufio.Reader, fr *wire.FrameReader, dr *deadlineReader) ([]byte, error) {
	if _, err := br.Peek(1); err != nil {
		return nil, err
	}
	c.busy.Add(1)
	defer c.done()
	timed := c.s.opt.RequestTimeout > 0
	if timed {
		dr.due = time.Now().Add(c.s.opt.RequestTimeout)
		defer dr.disarm()
	}
	frame, err := fr.ReadFrame()
	if err != nil && timed && errors.Is(err, os.ErrDeadlineExceeded) && c.waitCtx.Err() == nil {
		return nil, fmt.Errorf("%w: %v after its first byte", errRequestTimeout, c.s.opt.RequestTimeout)
	}
	return frame, err
}

// deadlineReader is the connection as the reader's bufio.Reader reads it.
// While a request is being read (due set), the first read that has to wait
// on the socket sets the request's deadline. A request that arrived whole
// with its first byte, the usual case, is parsed from the buffer and never
// touches the poller's timers: setting and clearing a deadline per request
// cost ~2.5% of a push's CPU.
type deadlineReader struct {
	c   *conn
	due time.Time // zero between requests: waiting for a first byte is idle time
	set bool      // the socket's deadline is due
}

func (r *deadlineReader) Read(p []byte) (int, error) {
	if !r.set && !r.due.IsZero() {
		r.c.setReadDeadline(r.due)
		r.set = true
		r.c.s.TestRequestWaits.Signal(struct{}{})
	}
	return r.c.nc.Read(p)
}

// disarm ends a request's read, clearing the socket's deadline if it was set.
func (r *deadlineReader) disarm() {
	r.due = time.Time{}
	if r.set {
		r.c.setReadDeadline(time.Time{})
		r.set = false
	}
}

// done ends one unit of busy (a request read or served).
func (c *conn) done() {
	if c.busy.Add(-1) == 0 {
		c.lastUsed.Store(time.Now().UnixNano())
	}
}

// setReadDeadline sets the reader's deadline unless wakeReader has stopped it.
func (c *conn) setReadDeadline(t time.Time) {
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	if !c.stopping {
		_ = c.nc.SetReadDeadline(t)
	}
}

// wakeReader makes the reader's blocked or next read fail at once, for good.
func (c *conn) wakeReader() {
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	c.stopping = true
	_ = c.nc.SetReadDeadline(time.Now())
}

// send writes an answer (see outbox) and, when wait is true, returns whether
// it was written.
func (c *conn) send(b []byte, wait bool) error { return c.out.send(b, wait) }

// budget is a semaphore over requests in flight and their bytes. Only the
// reader acquires, so it needs no fairness.
type budget struct {
	mu      sync.Mutex
	slots   int
	bytes   int
	waiting bool          // the reader waits on wake
	wake    chan struct{} // closed and replaced by a release while waiting
}

func newBudget(slots, bytes int) *budget {
	return &budget{slots: slots, bytes: bytes, wake: make(chan struct{})}
}

func (b *budget) acquire(ctx context.Context, n int) error {
	return waitUntil(ctx, &b.mu, func() (bool, <-chan struct{}) {
		if b.slots > 0 && b.bytes >= n {
			b.slots--
			b.bytes -= n
			return true, nil
		}
		b.waiting = true
		return false, b.wake
	})
}

// release returns n bytes and a slot. Only a waiting reader needs waking: a
// channel closed (and made anew) on every release would cost an allocation
// per request.
func (b *budget) release(n int) {
	b.mu.Lock()
	b.slots++
	b.bytes += n
	if b.waiting {
		b.waiting = false
		close(b.wake)
		b.wake = make(chan struct{})
	}
	b.mu.Unlock()
}

// ConnsByAddr counts the open connections by the client's IP address (the
// host of the remote address: a client's connections come from many ports).
func (s *Server) ConnsByAddr() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.conns))
	for c := range s.conns {
		addr := c.nc.RemoteAddr().String()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			addr = host
		}
		out[addr]++
	}
	return out
}
