package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// Issue 40, item 7, against the real binary: RPC answers other than pulls
// were not bounded. With a default-properties list of 1,000 entries (an
// answer of ~100 KiB to get_default_props), 8 connections that pipeline
// get_default_props, 100 to a write, and never read the answers took the
// gateway's RSS to 1,152 and 1,734 MiB: every request read was served and
// its answer built and queued, whatever the answers already waiting.

// TestRPCUnreadListAnswers: those 8 connections stop being read once their
// answers waiting (and those being built) reach --rpc-max-answer-bytes,
// and are closed when those do not drain within --rpc-write-timeout; the
// gateway's peak RSS stays under rpcAnswersRSSBound and it serves another
// client afterwards.
//
// The bound is on the peak RSS of the whole process (VmHWM), with no
// GOMEMLIMIT, as a deployment runs it. What the gateway may hold: 8 × 4 MiB
// of answers waiting (each possibly twice, its handler's copy and the
// outbox's), the answers being built within the bound, the embedded NATS
// server and the 1,000 compiled regexps, plus the garbage collector's slack
// (as much again as what is live). Measured on two loaded cores: a peak of
// 120 to 136 MiB (from 35 MiB before the flood); before listings were
// admitted, 1,182 and 1,604 MiB (the issue saw 1,152 and 1,734).
func TestRPCUnreadListAnswers(t *testing.T) {
	// A flood and a peak RSS to read: the full run's. The bound itself is
	// checked in the inner loop by rpc's TestUnreadListingsBounded.
	heavy(t, "floods 8 RPC connections with unread listings")
	const rpcAnswersRSSBound = 300 << 20
	const (
		conns    = 8
		entries  = 1000
		perWrite = 100
		// Each connection writes at most this many times (a bound on the
		// attack, not a condition of the test): 50,000 requests, ~5 GiB of
		// answers, far more than kernel buffers and bounds take.
		writes = 500
	)
	gw := Start(t, "--rpc-write-timeout", "3s")
	hc := gw.Client(t)

	list := make([][]any, entries)
	for i := range list {
		list[i] = []any{
			fmt.Sprintf("^tenant-%04d/jobs/.*", i),
			map[string]any{"retry": 3, "timeout": 45, "accum": 0, "priority": 1,
				"dead_letter_queue": fmt.Sprintf("tenant-%04d/dead", i)},
		}
	}
	body, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	hc.Expect(http.StatusNoContent, http.MethodPut, "/properties", body, "Content-Type", "application/json")
	probe := dialRPC(t, gw.RPCAddr)
	got, ok := probe.Must("get_default_props").([]any)
	if !ok || len(got) != entries {
		t.Fatalf("get_default_props: %d entries, want %d", len(got), entries)
	}
	probe.Close()
	awaitMetric(t, hc, "lmq_rpc_connections", "the probe's connection closed", func(v float64) bool { return v == 0 })

	before, err := procRSS(gw.PID(), "VmHWM:")
	if err != nil {
		t.Skipf("no RSS to check: %v", err)
	}
	e := mpEncoder{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	sent := 0
	for range conns {
		nc, err := net.Dial("tcp", gw.RPCAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		wg.Go(func() {
			// A write fails once the gateway closed the connection; the
			// deadline only ends a test that fails.
			_ = nc.SetWriteDeadline(time.Now().Add(2 * time.Minute))
			var id uint32
			n := 0
			defer func() {
				mu.Lock()
				sent += n
				mu.Unlock()
			}()
			for range writes {
				var batch []byte
				for range perWrite {
					batch = append(batch, rpcRequestFrame(e, id, "get_default_props", nil)...)
					id++
				}
				if _, err := nc.Write(batch); err != nil {
					return
				}
				n += perWrite
			}
		})
	}
	wg.Wait()
	// Every connection is closed by the gateway: its answers did not
	// drain. (Without the bound, building them all takes the gateway
	// long: the peak is reported either way.)
	closed := testwait.Until(2*time.Minute, func() bool { return rpcConnections(hc) == 0 })
	peak, err := procRSS(gw.PID(), "VmHWM:")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests sent on %d connections; peak RSS %d MiB before, %d MiB after (bound %d MiB)",
		sent, conns, before>>20, peak>>20, rpcAnswersRSSBound>>20)
	if peak > rpcAnswersRSSBound {
		t.Errorf("peak RSS %d MiB, over the %d MiB bound", peak>>20, rpcAnswersRSSBound>>20)
	}
	if !closed {
		t.Fatalf("%d flooding connections still open after 2 minutes", rpcConnections(hc))
	}

	// The gateway still serves.
	c := dialRPC(t, gw.RPCAddr)
	if got, ok := c.Must("get_default_props").([]any); !ok || len(got) != entries {
		t.Errorf("get_default_props after: %d entries, want %d", len(got), entries)
	}
	c.MustOK("push", "after-flood", "x")
	hc.Expect(http.StatusOK, http.MethodGet, "/properties", nil)
}

// rpcConnections is the gateway's lmq_rpc_connections gauge (-1: not found).
func rpcConnections(c *Client) int {
	r := c.Do(http.MethodGet, "/metrics", nil)
	for line := range strings.Lines(string(r.Body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "lmq_rpc_connections "); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return -1
}
