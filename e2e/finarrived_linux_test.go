package e2e

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// awaitFINArrived waits until the FIN of conn, closed by the test, has
// reached the other end's kernel: the socket's state in /proc/net/tcp(6)
// is past FIN_WAIT1 (the FIN acknowledged: FIN_WAIT2, TIME_WAIT, CLOSE), or
// the socket is gone. What the gateway's process has read of it is its own
// business; what this waits for is that it could have.
func awaitFINArrived(t testing.TB, conn net.Conn) {
	t.Helper()
	local, remote := conn.LocalAddr().(*net.TCPAddr), conn.RemoteAddr().(*net.TCPAddr)
	// /proc/net/tcp: "sl local_address rem_address st ...", addresses as
	// HEXIP:HEXPORT; the ports are enough on loopback between two ports.
	lp, rp := fmt.Sprintf(":%04X", local.Port), fmt.Sprintf(":%04X", remote.Port)
	testwait.ForDetail(t, "the FIN acknowledged by the gateway's end", func() (bool, string) {
		for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			b, err := os.ReadFile(table)
			if err != nil {
				continue
			}
			for line := range strings.Lines(string(b)) {
				f := strings.Fields(line)
				if len(f) < 4 || !strings.HasSuffix(f[1], lp) || !strings.HasSuffix(f[2], rp) {
					continue
				}
				switch f[3] {
				case "05", "06", "07": // FIN_WAIT2, TIME_WAIT, CLOSE
					return true, ""
				}
				return false, "state " + f[3]
			}
		}
		return true, "" // gone
	})
}
