//go:build linux || darwin || freebsd || netbsd || openbsd

package peer

import "syscall"

func peekEOF(fd uintptr) bool {
	var b [1]byte
	n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return n == 0 && err == nil
}
