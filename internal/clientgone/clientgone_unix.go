//go:build linux || darwin || freebsd || netbsd || openbsd

package clientgone

import "syscall"

// peekEOF: an end of stream (0 bytes, no error) or a reset connection mean
// the peer is gone; no data yet (EAGAIN) or unread data mean it is there.
func peekEOF(fd uintptr) bool {
	var b [1]byte
	n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch err {
	case nil:
		return n == 0
	case syscall.EAGAIN, syscall.EINTR:
		return false
	}
	return err == syscall.ECONNRESET || err == syscall.EPIPE || err == syscall.ENOTCONN
}
