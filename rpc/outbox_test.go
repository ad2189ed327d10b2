package rpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// tcpPair is a real loopback TCP connection: the server's end and the client's.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() {
		server.Close()
		client.Close()
	})
	return server, client
}

// outboxAnswer is a test answer: a 4-byte length, then sender and sequence
// number, then filler, so that the reader can tell an answer cut or mixed
// with another.
func outboxAnswer(sender, seq, size int) []byte {
	head := fmt.Sprintf("%d/%d|", sender, seq)
	b := make([]byte, 4, 4+size)
	b = append(b, head...)
	for len(b) < 4+size {
		b = append(b, byte('a'+sender%26))
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// Answers sent at once by many handlers, some waiting for the outcome, some
// large (beyond what may queue), all arrive whole, each exactly once.
func TestOutboxConcurrentAnswers(t *testing.T) {
	t.Parallel()
	server, client := tcpPair(t)
	var fails atomic.Int32
	o := newOutbox(server, 30*time.Second, func(error) { fails.Add(1) })

	const senders, each = 16, 40
	want := make(map[string]int)
	var total int
	sizes := func(s, i int) int {
		if i%13 == 0 {
			return maxQueuedAnswers + 1000*s // larger than may queue
		}
		return 20 + (s*7+i)%300
	}
	for s := range senders {
		for i := range each {
			a := outboxAnswer(s, i, sizes(s, i))
			want[string(a[4:])]++
			total += len(a)
		}
	}

	got := make(chan map[string]int, 1)
	go func() {
		seen := make(map[string]int)
		r := io.LimitReader(client, int64(total))
		var lenBuf [4]byte
		for {
			if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
				break
			}
			body := make([]byte, binary.BigEndian.Uint32(lenBuf[:]))
			if _, err := io.ReadFull(r, body); err != nil {
				break
			}
			seen[string(body)]++
		}
		got <- seen
	}()

	var wg sync.WaitGroup
	errs := make(chan error, senders*each)
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				if err := o.send(outboxAnswer(s, i, sizes(s, i)), i%2 == 0); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("send: %v", err)
	}
	seen := <-got
	if len(seen) != len(want) {
		t.Fatalf("received %d distinct answers, want %d", len(seen), len(want))
	}
	for a, n := range want {
		if seen[a] != n {
			t.Fatalf("answer %.20q received %d times, want %d", a, seen[a], n)
		}
	}
	if n := fails.Load(); n != 0 {
		t.Fatalf("onFail called %d times", n)
	}
}

// A failed write is reported once to onFail, and to every sender of an
// answer that was not written, then and afterwards.
func TestOutboxWriteFailure(t *testing.T) {
	t.Parallel()
	server, _ := tcpPair(t)
	var fails atomic.Int32
	o := newOutbox(server, 30*time.Second, func(error) { fails.Add(1) })
	server.Close()
	if err := o.send([]byte("x"), true); err == nil {
		t.Fatal("send on a closed connection succeeded")
	}
	if err := o.send([]byte("y"), false); err == nil {
		t.Fatal("send after a failure succeeded")
	}
	if n := fails.Load(); n != 1 {
		t.Fatalf("onFail called %d times, want 1", n)
	}
}

// A client that reads nothing: the write in progress fails at the write
// timeout; a small answer queued behind it returns at once (its sender does
// not wait), a large one waits and learns that it was not written.
func TestOutboxClientNotReading(t *testing.T) {
	t.Parallel()
	server, client := tcpPair(t)
	if err := client.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	var fails atomic.Int32
	o := newOutbox(server, 300*time.Millisecond, func(error) { fails.Add(1) })

	// More than the socket buffers hold (the client's is small, the
	// server's send buffer grows to tcp_wmem's maximum, 4 MiB by default),
	// so the write blocks.
	first := make(chan error, 1)
	go func() { first <- o.send(bytes.Repeat([]byte("z"), 16<<20), true) }()
	testwait.For(t, "the first write started", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.busy
	})
	if err := o.send([]byte("small"), false); err != nil {
		// Only possible if the write already failed; then it must be that.
		if !errors.Is(err, <-first) {
			t.Fatalf("small send: %v", err)
		}
		return
	}
	if err := o.send(make([]byte, maxQueuedAnswers+1), false); err == nil {
		t.Fatal("large answer behind a blocked write reported written")
	}
	if err := <-first; err == nil {
		t.Fatal("write to a client that reads nothing succeeded")
	}
	if n := fails.Load(); n != 1 {
		t.Fatalf("onFail called %d times, want 1", n)
	}
}
