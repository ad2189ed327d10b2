package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestOpsWaitingPullLimit: --max-waiting-pulls bounds the pulls that wait,
// HTTP and RPC together (the core counts them, issue 14): with one RPC and
// one HTTP pull waiting and a limit of 2, a third pull that would wait is
// refused at once by either front end (HTTP 503 with Retry-After, RPC
// "unavailable"), a pull that does not wait is served, and a slot freed by an
// answered pull is taken again.
func TestOpsWaitingPullLimit(t *testing.T) {
	t.Parallel()
	gw, c := StartClient(t, "--max-waiting-pulls", "2")
	r := dialRPC(t, gw.RPCAddr)

	_, rpcWaiting, err := r.Send("pull", "wl-rpc") // no timeout: waits for a message
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	httpWaiting := make(chan *Response, 1)
	go func() {
		resp, err := c.Send(ctx, http.MethodGet, "/messages/wl-http", nil)
		if err != nil {
			resp = &Response{Status: -1, Body: []byte(err.Error())}
		}
		httpWaiting <- resp
	}()
	awaitWaitingPulls(t, c, 2)

	resp := c.Do(http.MethodGet, "/messages/wl-x?t=5", nil)
	if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" ||
		!strings.Contains(string(resp.Body), "too many waiting pulls") || !strings.Contains(string(resp.Body), "limit 2") {
		t.Errorf("HTTP pull beyond the limit: %v, want 503 with Retry-After naming the limit", resp)
	}
	if e := r.MustFail("pull", "wl-x", 5); !strings.HasPrefix(e, "unavailable") {
		t.Errorf("RPC pull beyond the limit: %q, want unavailable", e)
	}
	// Pulls that do not wait are not counted.
	c.Expect(http.StatusNoContent, http.MethodGet, "/messages/wl-x?t=0", nil)
	if res := r.Must("pull", "wl-x", 0); res != "empty" {
		t.Errorf("RPC pull with timeout 0: %v, want empty", res)
	}

	// The waiting pulls are served; each frees its slot.
	r.MustOK("push", "wl-rpc", "for rpc")
	if m, err := r.Await(ctx, rpcWaiting); err != nil || m.Err != nil {
		t.Fatalf("waiting RPC pull: %v %v", m, err)
	}
	c.Push("wl-http", []byte("for http"), "")
	if got := <-httpWaiting; got.Status != http.StatusOK || string(got.Body) != "for http" {
		t.Fatalf("waiting HTTP pull: %v", got)
	}
	awaitMetric(t, c, "lmq_long_polls_waiting", "pulls waiting", func(v float64) bool { return v == 0 })
	c.Push("wl-x", []byte("now"), "")
	c.MustPull("wl-x", "5", "now")
}
