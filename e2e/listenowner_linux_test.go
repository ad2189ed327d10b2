package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// listensOn reports whether process pid holds the listening TCP socket on
// addr (host:port, IPv4). A port drawn by the harness can be drawn again by
// another test between its release and the gateway's bind; that other
// gateway then answers on it, and only the socket's owner tells the two
// apart. It looks the socket's inode up in /proc/net/tcp and then among the
// process's open files.
func listensOn(pid int, addr string) bool {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return true // not checkable here; the answer has to do
	}
	a := ap.Addr().As4()
	// /proc/net/tcp prints the address as the little-endian hex of the
	// 32-bit word, and the port in big-endian hex.
	local := fmt.Sprintf("%02X%02X%02X%02X:%04X", a[3], a[2], a[1], a[0], ap.Port())
	table, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return true
	}
	inode := ""
	for line := range strings.Lines(string(table)) {
		f := strings.Fields(line)
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
		if len(f) >= 10 && f[1] == local && f[3] == "0A" { // 0A: LISTEN
			inode = f[9]
			break
		}
	}
	if inode == "" {
		return false
	}
	want := "socket:[" + inode + "]"
	fds, err := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	if err != nil {
		return true
	}
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && target == want {
			return true
		}
	}
	return false
}

// TestListensOn: the harness tells its own listener from a port nobody, or
// another process, holds.
func TestListensOn(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !listensOn(os.Getpid(), l.Addr().String()) {
		t.Errorf("the test's own listener on %s is not found", l.Addr())
	}
	if listensOn(os.Getppid(), l.Addr().String()) {
		t.Errorf("the parent process is said to listen on %s", l.Addr())
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := closed.Addr().String()
	closed.Close()
	if listensOn(os.Getpid(), free) {
		t.Errorf("a closed port %s is said to be listened on", free)
	}
}
