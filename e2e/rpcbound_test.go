package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Issue 25, findings 2 and 3, against the real binary: connections that
// hold RPC's connection slots without finishing a request (slowloris) or
// without sending anything, and clients that pipeline requests and never
// read the answers.

// rpcSlowlorisStart is the first 6 bytes of a request frame (array of 4,
// type 0, msgid 1, the method name "pu…" cut short).
var rpcSlowlorisStart = []byte{0x94, 0x00, 0x01, 0xa4, 0x70, 0x75}

// TestRPCSlowlorisAndIdle: 40 connections that begin a request and stall
// hold every slot of --max-rpc-conns 40; a 41st client's push is answered
// once they are cut (--rpc-request-timeout after their first byte). Then 40
// connections that send nothing hold every slot; a new client's push is
// answered at once, in place of the longest-idle one.
func TestRPCSlowlorisAndIdle(t *testing.T) {
	t.Parallel()
	gw := Start(t, "--max-rpc-conns", "40", "--rpc-request-timeout", "2s")
	hold := func(first []byte) []net.Conn {
		var conns []net.Conn
		for range 40 {
			nc, err := net.Dial("tcp", gw.RPCAddr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { nc.Close() })
			if first != nil {
				if _, err := nc.Write(first); err != nil {
					t.Fatal(err)
				}
			}
			conns = append(conns, nc)
		}
		return conns
	}
	served := func(what string) time.Duration {
		start := time.Now()
		c := dialRPC(t, gw.RPCAddr)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := c.Call(ctx, "push", "slowloris", "hello")
		if err != nil || r.ErrString() != "" {
			t.Fatalf("%s: push of a 41st client: %v %v", what, r, err)
		}
		took := time.Since(start)
		t.Logf("%s: the 41st client's push answered after %v", what, took.Round(time.Millisecond))
		return took
	}

	stalled := hold(rpcSlowlorisStart)
	served("40 stalled requests")
	for i, nc := range stalled {
		if !closedByServer(nc) {
			t.Errorf("stalled connection %d still open", i)
		}
	}

	idle := hold(nil)
	served("40 idle connections")
	closed := 0
	for _, nc := range idle {
		_ = nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := nc.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
			closed++
		}
	}
	if closed < 1 {
		t.Errorf("no idle connection was reclaimed")
	}
}

// closedByServer reads from nc until the server closes it (true) or a
// generous bound passes (false).
func closedByServer(nc net.Conn) bool {
	_ = nc.SetReadDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 4096)
	for {
		if _, err := nc.Read(buf); err != nil {
			return !isTimeout(err)
		}
	}
}

// TestRPCUnreadAnswers: 8 connections pipeline pulls of a queue holding
// 2,000 messages of 64 KiB and never read the answers. The gateway stops
// reading them, and their pulls stop taking messages, once their answers
// waiting reach --rpc-max-answer-bytes; it closes them when those do not
// drain within --rpc-write-timeout; the messages they were not given stay
// in the queue, and the gateway's RSS grows by a bounded amount.
//
// The gateway runs with GOMEMLIMIT, so that its RSS follows the memory it
// holds rather than the garbage collector's slack (which varies from run to
// run by hundreds of MiB here): the bound is then on what it keeps. (Not
// parallel: t.Setenv, and the limit must reach this gateway only.)
func TestRPCUnreadAnswers(t *testing.T) {
	// 125 MiB of bodies and a peak RSS to read: the full run's. The bound
	// itself is checked in the inner loop by rpc's TestUnreadAnswersBounded.
	heavy(t, "floods 8 RPC connections with 125 MiB of answers")
	t.Setenv("GOMEMLIMIT", "192MiB")
	// The bound: the answers waiting (8 × 4 MiB of --rpc-max-answer-bytes,
	// and 8 × 16 pulls admitted at 256 KiB), each delivery's copies on its
	// way, and the embedded NATS server's buffers. Measured: +59 to +82 MiB
	// alone; before answers were bounded, +226 MiB under the same GOMEMLIMIT
	// (and the connections were closed only after 70 s). Beside the rest of
	// the suite on two cores the peak sometimes reached +290 MiB (two runs
	// in eleven): the collector starved of CPU lets garbage pile up. So a
	// run over the bound is tried once more on a fresh gateway, and the test
	// fails when both are: code that holds what it should not exceeds it
	// every time.
	const bound = 150 << 20
	for try := 1; ; try++ {
		gw, grew := unreadAnswers(t)
		if grew <= bound {
			// The gateway still serves.
			c := dialRPC(t, gw.RPCAddr)
			if r := c.Do("push", "after", "x"); r.ErrString() != "" {
				t.Fatalf("push after: %v", r)
			}
			return
		}
		if try == 2 {
			t.Fatalf("RSS grew by %d MiB, over the %d MiB bound, in both tries", grew>>20, bound>>20)
		}
		t.Logf("RSS grew by %d MiB, over the %d MiB bound: once more", grew>>20, bound>>20)
	}
}

// unreadAnswers runs one try of TestRPCUnreadAnswers on a new gateway and
// returns it with the growth of its peak RSS.
func unreadAnswers(t *testing.T) (*Gateway, int64) {
	t.Helper()
	gw := Start(t, "--rpc-write-timeout", "3s")
	const conns, n, size, q = 8, 2000, 64 << 10, "unread"
	hc := gw.Client(t)
	body := bytes.Repeat([]byte("y"), size)
	for i := 0; i < n; i += 250 {
		bodies := make([]string, 250)
		for j := range bodies {
			bodies[j] = string(body)
		}
		data, ct := multipartBatch(bodies)
		hc.Expect(http.StatusOK, http.MethodPost, "/messages/"+q+"?batch=1", data, "Content-Type", ct)
	}
	// The peak so far (the batches' own) is the baseline: VmHWM only grows.
	before, err := procRSS(gw.PID(), "VmHWM:")
	if err != nil {
		t.Skipf("no RSS to check: %v", err)
	}
	e := mpEncoder{}
	var wg sync.WaitGroup
	for range conns {
		nc, err := net.Dial("tcp", gw.RPCAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		wg.Go(func() {
			// A write fails once the gateway closed the connection; the
			// bound only ends a test that fails.
			_ = nc.SetWriteDeadline(time.Now().Add(2 * time.Minute))
			for id := uint32(0); ; id++ {
				if _, err := nc.Write(rpcRequestFrame(e, id, "pull", []any{q, 0})); err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	peak, err := procRSS(gw.PID(), "VmHWM:")
	if err != nil {
		t.Fatal(err)
	}
	r := hc.Expect(http.StatusOK, http.MethodGet, "/queues/"+q, nil)
	t.Logf("every connection closed by the gateway; peak RSS %d MiB before the pulls, %d MiB after (+%d MiB); queue: %s",
		before>>20, peak>>20, (peak-before)>>20, r.Body)
	return gw, peak - before
}

// procRSS reads a process's resident set size (field "VmRSS:") or its peak
// ("VmHWM:") in bytes.
func procRSS(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
