//go:build !linux

package e2e

import (
	"net"
	"testing"
)

// awaitFINArrived needs Linux's /proc/net/tcp to see a FIN acknowledged; the
// tests that need that skip elsewhere.
func awaitFINArrived(t testing.TB, _ net.Conn) {
	t.Helper()
	t.Skip("needs /proc/net/tcp (Linux) to see a FIN arrive")
}
