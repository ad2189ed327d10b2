// Package connlimit bounds the connections a listener hands out at once.
//
// Listener stops accepting while the limit is reached: the connections beyond
// it wait in the kernel's accept queue (their TCP handshake is done, nothing
// reads them) until one of the accepted connections is closed. Waiting, rather
// than closing the newcomers, turns a burst into a delay instead of errors,
// and a flood of connections costs the server no file descriptor, goroutine
// or buffer beyond the limit.
package connlimit

import (
	"net"
	"sync"
)

// Listener wraps a net.Listener so that at most a fixed number of the
// connections it accepted are open at once.
type Listener struct {
	net.Listener
	sem       chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

// Listen wraps l with a limit of max open connections; max <= 0 returns l
// itself (no limit).
func Listen(l net.Listener, max int) net.Listener {
	if max <= 0 {
		return l
	}
	return &Listener{Listener: l, sem: make(chan struct{}, max), closed: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection. It returns
// net.ErrClosed once the listener is closed, also while waiting for a slot.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return newConn(c, l.sem), nil
}

// Close closes the listener and wakes an Accept waiting for a slot.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// InUse is the number of accepted connections not yet closed.
func (l *Listener) InUse() int { return len(l.sem) }

// conn frees its slot on the first Close.
type conn struct {
	net.Conn
	sem  chan struct{}
	once sync.Once
}

// closeWriter is what net/http looks for to half-close a connection before
// closing it (so that a client still sending gets the answer, not a reset).
type closeWriter interface {
	CloseWrite() error
}

// connCW is a conn whose underlying connection can half-close; wrapping
// must not hide that from net/http.
type connCW struct {
	*conn
}

func (c connCW) CloseWrite() error { return c.Conn.(closeWriter).CloseWrite() }

func newConn(c net.Conn, sem chan struct{}) net.Conn {
	lc := &conn{Conn: c, sem: sem}
	if _, ok := c.(closeWriter); ok {
		return connCW{lc}
	}
	return lc
}

// NetConn returns the accepted connection (as tls.Conn does), so that what
// looks at the socket itself (internal/clientgone: has the client closed
// it?) can reach it through the wrapper.
func (c *conn) NetConn() net.Conn { return c.Conn }

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.sem })
	return err
}
