package e2e

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestKillDurability: what the gateway answered before a kill -9 holds after
// a restart on the same data: a push answered 200 is there, an ack answered
// 204 stays done, and a delivery in flight comes back under a new id (at the
// latest when the consumer's AckWait backstop, timeout+5s, runs out).
func TestKillDurability(t *testing.T) {
	heavy(t, "a kill loop")
	t.Parallel()
	gw, c := StartClient(t)
	const q = "durable"
	// A short timeout keeps the backstop short.
	const backstop = 500*time.Millisecond + 5*time.Second
	c.PatchProps(q, `{"timeout":0.5}`)
	c.Push(q, []byte("acked"), "")
	c.Push(q, []byte("in-flight"), "")
	pulled := time.Now()
	acked := c.MustPull(q, msgWait, "acked")
	inflight := c.MustPull(q, msgWait, "in-flight")
	c.ExpectReply(http.StatusNoContent, q, acked.ID(), "ack")
	c.Push(q, []byte("pushed"), "text/plain")
	gw.Kill()
	gw.Restart()

	// Ids handed out by the dead process are void.
	for _, id := range []string{acked.ID(), inflight.ID()} {
		c.ExpectReply(http.StatusNotFound, q, id, "ack")
	}

	// "pushed" is there at once; "in-flight" comes back now (if JetStream lost
	// the consumer's delivery state with the process) or after the backstop.
	want := map[string]bool{"pushed": true, "in-flight": true}
	for len(want) > 0 {
		r := c.Pull(q, "10")
		if r.Status != http.StatusOK || !want[string(r.Body)] {
			t.Fatalf("after restart: got %v, want one of %v", r, want)
		}
		delete(want, string(r.Body))
		ExpectMessage(t, r, q, string(r.Body))
		if string(r.Body) == "pushed" {
			if got := r.Header.Get("Content-Type"); got != "text/plain" {
				t.Errorf("content-type after restart %q", got)
			}
		}
		t.Logf("after restart: %s, retry-remaining %d, %v after the first pull", r.Body, r.Retry(), time.Since(pulled))
		c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	}

	// Had the ack been lost, "acked" would be back by the end of its backstop.
	wait := time.Until(pulled.Add(backstop + 1500*time.Millisecond))
	c.PullEmpty(q, strconv.FormatFloat(max(wait.Seconds(), 0), 'f', 3, 64))
}
