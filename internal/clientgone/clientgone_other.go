//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package clientgone

func peekEOF(uintptr) bool { return false }
