package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// HeaderReleaseOnDisconnect is the request header with which a pull (beyond
// LMQ) binds the delivery it gets to its connection: "1" or "true" binds,
// "0" or "false" (or no header) does not. A bound delivery that the client
// has not acked or nacked on that same connection when the connection
// closes returns to the queue at once, without counting a retry, instead of
// after the queue's timeout. The connection must be kept alive until the
// reply: a request with "Connection: close" is refused, and the server's idle
// timeout (--idle-timeout) closing a connection releases its deliveries too.
const HeaderReleaseOnDisconnect = "X-Lmq-Release-On-Disconnect"

// binder is the part of a core that binds deliveries to a connection;
// *gateway.Messages has it.
type binder interface {
	NewBound() *gateway.Bound
}

var _ binder = (*gateway.Messages)(nil)

// ConnBound tracks the bound deliveries of every HTTP connection. Create it
// with NewConnBound, give it to New (Options.ConnBound) and set the
// http.Server's ConnState to its ConnState method, which releases a
// connection's deliveries when it closes. Connections that never pull with
// the header cost a map lookup at close.
type ConnBound struct {
	core binder
	log  *slog.Logger

	mu    sync.Mutex
	conns map[net.Conn]*gateway.Bound
}

// NewConnBound returns the tracker of core's bound deliveries; nil when core
// cannot bind deliveries (then the header is refused).
func NewConnBound(core Core, log *slog.Logger) *ConnBound {
	b, ok := core.Messages.(binder)
	if !ok {
		return nil
	}
	if log == nil {
		log = slog.Default()
	}
	return &ConnBound{core: b, log: log, conns: make(map[net.Conn]*gateway.Bound)}
}

// ConnState is for http.Server.ConnState: a connection that closes (or is
// hijacked, leaving the server's hands) releases its bound deliveries.
func (cb *ConnBound) ConnState(c net.Conn, st http.ConnState) {
	if cb == nil || (st != http.StateClosed && st != http.StateHijacked) {
		return
	}
	cb.mu.Lock()
	b := cb.conns[c]
	delete(cb.conns, c)
	cb.mu.Unlock()
	if b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n := b.Release(ctx); n > 0 {
		cb.log.Debug("http connection closed with deliveries unanswered; released", "count", n)
	}
}

// Bound is the number of deliveries bound to open connections (some may
// have been answered elsewhere since), for tests and statistics.
func (cb *ConnBound) Bound() int {
	if cb == nil {
		return 0
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	n := 0
	for _, b := range cb.conns {
		n += b.Len()
	}
	return n
}

// wantsBound reads the pull's header: whether to bind what it gets, or an
// error (400) when the value is not a boolean, the connection will not be
// kept alive, or this server cannot bind deliveries.
func (a *api) wantsBound(r *http.Request) (bool, error) {
	v, ok := r.Header[HeaderReleaseOnDisconnect]
	if !ok {
		return false, nil
	}
	var on bool
	switch strings.ToLower(strings.TrimSpace(firstOf(v))) {
	case "1", "true":
		on = true
	case "0", "false":
		return false, nil
	default:
		return false, fmt.Errorf("%w: %s must be 1, true, 0 or false", gateway.ErrInvalid, HeaderReleaseOnDisconnect)
	}
	if r.Close {
		return false, fmt.Errorf("%w: %s needs a kept-alive connection (the request asks to close it)",
			gateway.ErrInvalid, HeaderReleaseOnDisconnect)
	}
	if a.opts.ConnBound == nil || connOf(r) == nil {
		return false, fmt.Errorf("%w: %s is not available on this server", gateway.ErrInvalid, HeaderReleaseOnDisconnect)
	}
	return on, nil
}

func connOf(r *http.Request) net.Conn {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	return c
}

// bind records d, written to the client of r, on r's connection.
func (a *api) bind(r *http.Request, d *gateway.Delivery) {
	cb, c := a.opts.ConnBound, connOf(r)
	cb.mu.Lock()
	b := cb.conns[c]
	if b == nil {
		b = cb.core.NewBound()
		cb.conns[c] = b
	}
	cb.mu.Unlock()
	b.Add(r.Context(), d)
	// With HTTP/1.1 the connection's ConnState(StateClosed) comes after its
	// handlers ended; with HTTP/2 it may come while one runs, and an entry
	// made after it would never be released. Its requests' contexts end
	// before it, so a context still alive here means ConnState will find
	// the entry; one that ended means the connection is gone or going:
	// release at once (ConnState may have run already).
	if r.Context().Err() != nil || clientClosed(r) {
		cb.mu.Lock()
		if cb.conns[c] == b {
			delete(cb.conns, c)
		}
		cb.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.Release(ctx)
	}
}

// unbind forgets a delivery its client acked or nacked on this connection.
func (a *api) unbind(r *http.Request, id string) {
	cb := a.opts.ConnBound
	if cb == nil {
		return
	}
	c := connOf(r)
	cb.mu.Lock()
	b := cb.conns[c]
	cb.mu.Unlock()
	if b != nil {
		b.Done(id)
	}
}
