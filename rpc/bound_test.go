package rpc

import (
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/fakecore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// startOfPush is the first 6 bytes of a request frame (fixarray of 4, type
// 0, msgid 1, then the method name "pu…" cut short): issue 25's slowloris.
var startOfPush = []byte{0x94, 0x00, 0x01, 0xa4, 0x70, 0x75}

// dialRaw opens a plain TCP connection to addr, closed when the test ends.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// TestStalledRequestsCut: connections that begin a request and stall hold
// every slot; each is cut RequestTimeout after its first byte, and a
// newcomer is then served.
func TestStalledRequestsCut(t *testing.T) {
	t.Parallel()
	core := fakecore.New()
	addr, _ := startServer(t, core, Options{MaxConns: 3, RequestTimeout: 300 * time.Millisecond})
	var stalled []*testClient
	for range 3 {
		nc := dialRaw(t, addr)
		if _, err := nc.Write(startOfPush); err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, &testClient{t: t, conn: nc})
	}
	c := dialRPC(t, addr)
	c.ok("ok", "push", "q", "hello")
	for _, s := range stalled {
		s.closed()
	}
}

// TestIdleConnectionsReclaimed: connections that never send anything hold
// every slot; a newcomer is served at once, in place of the longest-idle one,
// while a client waiting in a long-poll pull is never cut.
func TestIdleConnectionsReclaimed(t *testing.T) {
	t.Parallel()
	core := fakecore.New()
	addr, s := startServer(t, core, Options{MaxConns: 3, RequestTimeout: time.Hour})
	waiting := dialRPC(t, addr)
	waiting.send("pull", "waited", 3600)
	<-core.Waiting() // the pull is being served: the connection is not idle
	var idle []net.Conn
	for range 2 {
		idle = append(idle, dialRaw(t, addr))
	}
	testwait.For(t, "3 connections served", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns) == 3
	})
	for i := range 4 {
		c := dialRPC(t, addr)
		c.ok("ok", "push", "q", fmt.Sprintf("m%d", i))
	}
	// The long-poll still waits, and gets its message.
	if _, err := core.Messages().Push(t.Context(), "waited", gateway.Message{Body: []byte("at last")}); err != nil {
		t.Fatal(err)
	}
	if d := waiting.recv().delivery(t); d.Queue != "waited" {
		t.Fatalf("long-poll got %+v", d)
	}
	for _, nc := range idle {
		(&testClient{t: t, conn: nc}).closed()
	}
}

// TestUnreadAnswersBounded: a client that pipelines pulls and never reads
// the answers stops being read once its answers waiting to be written reach
// MaxAnswerBytes, its pulls stop taking messages, and it is closed when they
// do not drain within WriteTimeout; the messages it was not given are still
// in the queue.
func TestUnreadAnswersBounded(t *testing.T) {
	t.Parallel()
	core := fakecore.New()
	const n, size = 1000, 64 << 10
	body := bytes.Repeat([]byte("x"), size)
	for range n {
		core.Put("big", gateway.Message{Body: body})
	}
	addr, s := startServer(t, core, Options{MaxAnswerBytes: 256 << 10, WriteTimeout: 500 * time.Millisecond})
	nc := dialRaw(t, addr)
	// Pull requests are written from another goroutine until the server
	// closes: it stops reading them, and a write may block until then.
	go func() {
		for i := uint32(0); ; i++ {
			if _, err := nc.Write(encodeRequest(t, i, "pull", "big", 0)); err != nil {
				return
			}
		}
	}()
	// Reading would drain the answers: the server's side tells when it
	// closed the connection, then the client's sees the end.
	// (Served first: a pull took a message. Before it was accepted, the
	// server had no connection either.)
	testwait.For(t, "a pull served", func() bool { return core.Size("big") < n })
	testwait.For(t, "the connection closed by the server", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns) == 0
	})
	(&testClient{t: t, conn: nc}).closed()
	if held, reserved := s.answers.held(); held != 0 || reserved != 0 {
		t.Errorf("%d answer bytes still counted (%d set aside) after the close", held, reserved)
	}
	// The kernel's buffers took some answers; far from all were taken.
	left := core.Size("big")
	t.Logf("%d of %d messages left in the queue", left, n)
	if left < n/2 {
		t.Errorf("only %d of %d messages left: pulls kept taking messages for a client that did not read", left, n)
	}
}

// TestRequestDeadlineArmedWhenWaiting: the request deadline is set only
// when a request's bytes must be waited for (server.go, deadlineReader), so
// it must still cut a request that stalls after whole ones arrived in the
// same segment, and must not cut a connection idle between requests or a
// request that arrives in pieces within the bound.
func TestRequestDeadlineArmedWhenWaiting(t *testing.T) {
	t.Parallel()
	core := fakecore.New()
	// The bound is generous, so that a loaded machine does not cut a
	// request whose pieces are only as far apart as the server's read of
	// the first one.
	const bound = 2 * time.Second
	addr, s := startServer(t, core, Options{RequestTimeout: bound})
	c := dialRPC(t, addr)

	// Idle longer than the bound before the first byte: still served. The
	// time must pass with nothing sent: a deadline that wrongly fired shows
	// only in the answer that follows, no condition stands for it.
	time.Sleep(bound + bound/4) // idle time is the input
	c.ok("ok", "push", "q", "after idle")

	// A request in two pieces, well within the bound.
	req := encodeRequest(t, c.next, "push", "q", "in pieces")
	c.next++
	s.TestRequestWaits.Init(t)
	c.write(req[:5])
	s.TestRequestWaits.WaitOrTimeout() // the server read the first piece alone and waits for the rest
	c.write(req[5:])
	if r := c.recv(); r.err != nil {
		t.Fatalf("push in pieces: %v", r.err)
	}

	// A whole request and the start of the next in one write, then
	// nothing: the first is answered, the connection is cut.
	whole := encodeRequest(t, c.next, "push", "q", "whole")
	c.write(append(whole, startOfPush...))
	if r := c.recv(); r.err != nil {
		t.Fatalf("whole push: %v", r.err)
	}
	c.closed()
}
