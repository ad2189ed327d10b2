//go:build linux || darwin || freebsd || netbsd || openbsd

package clientgone

import (
	"net"
	"syscall"
	"testing"
)

// unread reports whether c has a byte waiting to be read, without taking
// it: the test's own look at the socket, to know when what the peer wrote
// has arrived.
func unread(t *testing.T, c net.Conn) bool {
	t.Helper()
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, _ = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		t.Fatal(err)
	}
	return n > 0
}
