package clientgone

import (
	"net"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnet"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

func TestClosed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, server := testnet.Accept(t, l)
	if Closed(server) {
		t.Fatal("open connection reported closed")
	}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	// Let the byte arrive: seeing it would take the peek under test.
	time.Sleep(20 * time.Millisecond)
	if Closed(server) {
		t.Fatal("connection with unread data reported closed")
	}
	buf := make([]byte, 1)
	if _, err := server.Read(buf); err != nil || buf[0] != 'x' {
		t.Fatalf("peek consumed data: %v %q", err, buf)
	}
	client.Close()
	testwait.For(t, "the closed connection detected", func() bool { return Closed(server) })
}
