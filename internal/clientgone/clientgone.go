// Package clientgone tells whether the other end of a TCP connection has
// closed it, without reading from it. Front ends ask just before writing a delivered
// message: a client that left while its long-poll waited must get the message
// put back at once, and writing to a socket the peer has closed still
// succeeds (the kernel buffers it), so only the connection's state tells.
package clientgone

import (
	"net"
	"syscall"
)

// Closed reports whether the peer has closed (or half-closed) c: a pending end
// of stream with no unread data before it. It never blocks and never consumes
// data; on connections it cannot inspect it reports false.
//
// Wrappers that expose the connection they wrap with NetConn (tls.Conn, the
// HTTP server's connection limiter) are looked through: a wrapper that hid
// the socket would make every peer look present, and a delivery be written
// to a client that has left.
func Closed(c net.Conn) bool {
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = w.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	// Control, unlike Read, does not wait for the read lock that a blocked
	// reader goroutine of the connection holds.
	_ = raw.Control(func(fd uintptr) { closed = peekEOF(fd) })
	return closed
}
