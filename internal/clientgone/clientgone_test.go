package clientgone

import (
	"net"
	"testing"

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
	// The byte arrived (the test's own peek sees it, and leaves it there).
	testwait.For(t, "the byte to arrive", func() bool { return unread(t, server) })
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
