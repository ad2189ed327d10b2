package connlimit

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/clientgone"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnet"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// accepted runs Accept in the background and returns its results.
func accepted(l net.Listener) <-chan net.Conn {
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(ch)
			return
		}
		ch <- c
	}()
	return ch
}

// listenLimited is a Listener of n connections on a loopback port, closed
// when the test ends.
func listenLimited(t *testing.T, n int) *Listener {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(inner, n).(*Listener)
	t.Cleanup(func() { l.Close() })
	return l
}

func TestLimit(t *testing.T) {
	l := listenLimited(t, 2)
	var clients []net.Conn
	dial := func() net.Conn {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
		return c
	}
	dial()
	dial()
	s1, s2 := <-accepted(l), <-accepted(l)
	if s1 == nil || s2 == nil || l.InUse() != 2 {
		t.Fatalf("accepted %v %v, in use %d", s1, s2, l.InUse())
	}
	// The third waits in the kernel's queue: Accept does not return it.
	dial()
	third := accepted(l)
	select {
	case c := <-third:
		t.Fatalf("third connection accepted beyond the limit: %v", c)
	case <-time.After(200 * time.Millisecond):
	}
	// Closing one (twice: the slot is freed once) lets it in.
	s1.Close()
	s1.Close()
	s3 := <-third
	if s3 == nil {
		t.Fatal("third connection not accepted after a slot was freed")
	}
	// It is the third client's connection: what it writes arrives.
	if _, err := clients[2].Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(s3, b); err != nil || b[0] != 'x' {
		t.Fatalf("read %q, %v", b, err)
	}
	if l.InUse() != 2 {
		t.Fatalf("in use %d, want 2", l.InUse())
	}
	// An Accept waiting for a slot ends when the listener closes.
	waiting := accepted(l)
	l.Close()
	if c, ok := <-waiting; ok {
		t.Fatalf("Accept after Close returned %v", c)
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	s2.Close()
	s3.Close()
}

func TestCloseWriteKept(t *testing.T) {
	l := listenLimited(t, 1)
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := <-accepted(l)
	defer s.Close()
	cw, ok := s.(closeWriter)
	if !ok {
		t.Fatal("a TCP connection lost CloseWrite in the wrapper")
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// The client sees the end of the stream.
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("client read %d, %v; want EOF", n, err)
	}
}

func TestNoLimit(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	if Listen(inner, 0) != inner {
		t.Fatal("Listen with 0 wrapped the listener")
	}
}

// TestPeerSeesThroughConn: the limiter's connections still let
// internal/clientgone see that the client has closed the socket (the HTTP
// front end asks before writing a delivery).
func TestPeerSeesThroughConn(t *testing.T) {
	l := listenLimited(t, 4)
	client, server := testnet.Accept(t, l)
	if clientgone.Closed(server) {
		t.Fatal("open connection reported closed")
	}
	client.Close()
	testwait.For(t, "the closed client seen through the limiter's connection", func() bool { return clientgone.Closed(server) })
}
