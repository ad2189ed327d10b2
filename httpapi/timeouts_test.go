package httpapi

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// A client that reads nothing does not hold its answer's handler: the write
// fails at the write timeout and the delivery is given back. (The deadline
// is set by the body's Write, not by WriteHeader.)
func TestWriteTimeoutOnDelivery(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{Timeouts: Timeouts{Write: 300 * time.Millisecond}})
	// More than the socket buffers hold: the client's receive buffer is
	// fixed small below, the server's send buffer grows to tcp_wmem's
	// maximum (4 MiB by default).
	big := strings.Repeat("z", 16<<20)
	s.do("POST", "/messages/big", big).want(t, "push", 200, `{"accum":"no"}`)

	conn, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("GET /messages/big?t=0 HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	// Reads nothing.
	testwait.For(t, "the delivery to a client that reads nothing given back", func() bool { return len(s.core.Abandoned()) > 0 })
}
