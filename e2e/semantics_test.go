package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// TestDeliverySemantics checks LMQ's delivery rules (ids, retries, timeouts,
// replies, order, long-polls) on one shared gateway, one queue per subtest.
// Timing assertions keep a margin of at least 150ms on either side.
func TestDeliverySemantics(t *testing.T) {
	t.Parallel()
	gw := Start(t)
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *Client)
	}{
		{"FreshIDAndRetryCountdown", testFreshIDAndRetryCountdown},
		{"RetryExhaustedByTimeout", testRetryExhaustedByTimeout},
		{"FractionalTimeout", testFractionalTimeout},
		{"ZeroTimeout", testZeroTimeout},
		{"RetryAtPushTimeoutAtDelivery", testRetryAtPushTimeoutAtDelivery},
		{"ExtRestartsTimer", testExtRestartsTimer},
		{"NackGoesBehindWaiting", testNackGoesBehindWaiting},
		{"OrderTimedOutLater", testOrderTimedOutLater},
		{"OrderTimedOutEarlier", testOrderTimedOutEarlier},
		{"LongPollWakesOnPush", testLongPollWakesOnPush},
		{"DisconnectWhileWaiting", testDisconnectWhileWaiting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, gw.Client(t))
		})
	}
}

// testFreshIDAndRetryCountdown: each delivery has a new id, the old one
// answers 404, retry-remaining counts 2,1,0 and a nack of the last delivery
// discards the message.
func testFreshIDAndRetryCountdown(t *testing.T, c *Client) {
	const q = "sem-countdown"
	c.Push(q, []byte("m"), "")
	seen := map[string]bool{}
	for _, want := range []int{2, 1, 0} {
		r := c.MustPull(q, msgWait, "m")
		if r.Retry() != want {
			t.Fatalf("delivery %d: retry-remaining %d, want %d", len(seen)+1, r.Retry(), want)
		}
		if seen[r.ID()] {
			t.Fatalf("delivery id %s handed out twice", r.ID())
		}
		seen[r.ID()] = true
		c.ExpectReply(http.StatusNoContent, q, r.ID(), "nack")
		for _, reply := range []string{"ack", "nack", "ext"} {
			c.ExpectReply(http.StatusNotFound, q, r.ID(), reply)
		}
	}
	c.PullEmpty(q, "0.5")
}

// testRetryExhaustedByTimeout: timeouts also consume retries; the timed-out
// id answers 404; after retry+1 deliveries the message is gone.
func testRetryExhaustedByTimeout(t *testing.T, c *Client) {
	const q = "sem-exhaust"
	c.PatchProps(q, `{"timeout":0.3}`)
	c.Push(q, []byte("m"), "")
	var prev string
	for _, want := range []int{2, 1, 0} {
		r := c.MustPull(q, msgWait, "m")
		if r.Retry() != want {
			t.Fatalf("retry-remaining %d, want %d", r.Retry(), want)
		}
		if prev != "" {
			c.ExpectReply(http.StatusNotFound, q, prev, "ack")
		}
		prev = r.ID()
	}
	c.PullEmpty(q, "1.5")
	c.ExpectReply(http.StatusNotFound, q, prev, "ext")
}

// testFractionalTimeout: a timeout below one second is honoured as such.
// Checked by order, not by a clock: "slow" is delivered first under timeout
// 1, then "fast" under timeout 0.3 (the timeout is read at delivery). A timed
// out message goes back to the tail, so "fast" comes back first; rounded up
// to a whole second, "slow" would.
func testFractionalTimeout(t *testing.T, c *Client) {
	const q = "sem-fraction"
	c.PatchProps(q, `{"timeout":1}`)
	c.Push(q, []byte("slow"), "")
	c.Push(q, []byte("fast"), "")
	c.MustPull(q, msgWait, "slow")
	c.PatchProps(q, `{"timeout":0.3}`)
	start := time.Now()
	first := c.MustPull(q, msgWait, "fast")
	// Rounded down (to 0) it would come back at once.
	again := pullTimedOut(t, c, q, "fast", start, 1)
	c.ExpectReply(http.StatusNotFound, q, first.ID(), "ack")
	// (No ack of the redelivery: under load it could come after its 0.3s.)
	// "slow" comes back too (under timeout 0.3 now); the third delivery of
	// "fast" may come before or after it.
	var last *Response
	for last == nil {
		r := c.Pull(q, msgWait)
		ExpectMessage(t, r, q, string(r.Body))
		switch string(r.Body) {
		case "slow":
			c.Reply(q, r.ID(), "ack") // 404 if it timed out meanwhile: it comes back
		case "fast":
			last = r
		}
	}
	if last.Retry() != 0 || last.ID() == again.ID() {
		t.Errorf("third delivery: retry-remaining %d, id %s (before %s)", last.Retry(), last.ID(), again.ID())
	}
	c.ExpectReply(http.StatusNotFound, q, again.ID(), "ack")
	// "fast" has no retry left: once "slow" is acked, nothing comes back.
	for {
		r := c.Pull(q, "1")
		if r.Status == http.StatusNoContent {
			break
		}
		ExpectMessage(t, r, q, "slow")
		c.Reply(q, r.ID(), "ack")
	}
}

// pullTimedOut pulls body again after its timeout of 0.3s, which ran from
// no earlier than start, and checks that it did not come back sooner and
// came with retry-remaining retry.
func pullTimedOut(t *testing.T, c *Client, q, body string, start time.Time, retry int) *Response {
	t.Helper()
	r := c.MustPull(q, msgWait, body)
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("%q came back %v after the pull, want 0.3s or later", body, d)
	}
	if r.Retry() != retry {
		t.Errorf("redelivery of %q: retry-remaining %d, want %d", body, r.Retry(), retry)
	}
	return r
}

// testZeroTimeout: timeout 0 makes a pulled message available again at once,
// with one retry less, and its id invalid.
func testZeroTimeout(t *testing.T, c *Client) {
	const q = "sem-zero"
	c.PatchProps(q, `{"timeout":0}`)
	c.Push(q, []byte("m"), "")
	var ids []string
	for _, want := range []int{2, 1, 0} {
		r := c.MustPull(q, msgWait, "m")
		if r.Retry() != want {
			t.Fatalf("retry-remaining %d, want %d", r.Retry(), want)
		}
		ids = append(ids, r.ID())
	}
	c.PullEmpty(q, "0.5")
	for _, id := range ids {
		c.ExpectReply(http.StatusNotFound, q, id, "ack")
	}
}

// testRetryAtPushTimeoutAtDelivery: retry is fixed when a message is
// pushed, timeout is read when it is delivered.
func testRetryAtPushTimeoutAtDelivery(t *testing.T, c *Client) {
	const q = "sem-props-time"
	c.Push(q, []byte("before"), "") // retry 2, pushed while timeout is 30
	c.PatchProps(q, `{"retry":0,"timeout":0.3}`)
	c.Push(q, []byte("after"), "")
	start := time.Now()
	if r := c.MustPull(q, msgWait, "before"); r.Retry() != 2 {
		t.Errorf("message pushed under retry 2: retry-remaining %d", r.Retry())
	}
	if r := c.MustPull(q, msgWait, "after"); r.Retry() != 0 {
		t.Errorf("message pushed under retry 0: retry-remaining %d", r.Retry())
	}
	// Both time out after 0.3s; "after" has no retry left and is discarded.
	// (Under the timeout 30 of the push it would not come back within
	// msgWait.)
	r := pullTimedOut(t, c, q, "before", start, 1)
	c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	c.PullEmpty(q, "0.6")
}

// pushPull sets q's properties, pushes body and pulls it. start is taken
// just before the pull: the message's timeout runs from no earlier.
func pushPull(c *Client, q, props, body string) (r *Response, start time.Time) {
	c.PatchProps(q, props)
	c.Push(q, []byte(body), "")
	start = time.Now()
	return c.MustPull(q, msgWait, body), start
}

// testExtRestartsTimer: ext moves the deadline to now+timeout, keeps the id,
// and the message still times out after the new deadline.
func testExtRestartsTimer(t *testing.T, c *Client) {
	const q = "sem-ext"
	r, start := pushPull(c, q, `{"timeout":3}`, "m")
	sleepUntil(start.Add(1500 * time.Millisecond))
	extAt := time.Now()
	c.ExpectReply(http.StatusNoContent, q, r.ID(), "ext")
	// Past the first deadline (3s after the pull), before the new one (3s
	// after the ext). On a machine so slow that the ext came late, the
	// pull could reach the new deadline too: then there is no such moment
	// to look at, and only the lower bound below is checked.
	sleepUntil(start.Add(3300 * time.Millisecond))
	if time.Since(extAt) < 2500*time.Millisecond {
		c.PullEmpty(q, "0")
	} else {
		t.Logf("ext sent %v after the pull: the old deadline is not checked", extAt.Sub(start))
	}
	again := c.MustPull(q, msgWait, "m")
	if d := time.Since(extAt); d < 2900*time.Millisecond {
		t.Errorf("message came back %v after ext, want 3s or later", d)
	}
	if again.Retry() != 1 {
		t.Errorf("retry-remaining %d, want 1", again.Retry())
	}
	c.ExpectReply(http.StatusNotFound, q, r.ID(), "ext")
	c.ExpectReply(http.StatusNoContent, q, again.ID(), "ext")
	c.ExpectReply(http.StatusNoContent, q, again.ID(), "ack")
}

// testNackGoesBehindWaiting: fresh messages come in push order; a nacked one
// is available at once but behind those already waiting.
func testNackGoesBehindWaiting(t *testing.T, c *Client) {
	const q = "sem-nack-order"
	c.Push(q, []byte("A"), "")
	a := c.MustPull(q, msgWait, "A")
	for _, b := range []string{"B", "C", "D"} {
		c.Push(q, []byte(b), "")
	}
	c.ExpectReply(http.StatusNoContent, q, a.ID(), "nack")
	for _, b := range []string{"B", "C", "D", "A"} {
		r := c.MustPull(q, msgWait, b)
		if want := map[bool]int{true: 1, false: 2}[b == "A"]; r.Retry() != want {
			t.Errorf("%s: retry-remaining %d, want %d", b, r.Retry(), want)
		}
		c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	}
	c.PullEmpty(q, "0")
}

// testOrderTimedOutLater is LMQ's own example (a message that timed out at
// t+0.9s is served after one that became available at t+0.7s): a message
// that was waiting when another timed out is served first. JetStream alone
// would redeliver the timed-out one first. Both are pushed before the pull,
// so that fresh surely became available before the timeout, however slow
// the machine.
func testOrderTimedOutLater(t *testing.T, c *Client) {
	const q = "sem-order-later"
	c.PatchProps(q, `{"timeout":3}`)
	c.Push(q, []byte("timed-out"), "")
	c.Push(q, []byte("fresh"), "")
	c.MustPull(q, msgWait, "timed-out") // the older: fresh waits
	// Served after the timeout, fresh still comes first.
	testwait.For(t, "queueDetail(t, c, q).InFlight == 0", func() bool { return queueDetail(t, c, q).InFlight == 0 })
	c.MustPull(q, msgWait, "fresh")
	if r := c.MustPull(q, msgWait, "timed-out"); r.Retry() != 1 {
		t.Errorf("timed-out message: retry-remaining %d, want 1", r.Retry())
	}
}

// testOrderTimedOutEarlier: the converse; a message that timed out before a
// fresh push is served before it.
func testOrderTimedOutEarlier(t *testing.T, c *Client) {
	const q = "sem-order-earlier"
	pushPull(c, q, `{"timeout":0.3}`, "timed-out")
	// The timeout ends it: nothing else does.
	testwait.For(t, "queueDetail(t, c, q).InFlight == 0", func() bool { return queueDetail(t, c, q).InFlight == 0 })
	c.Push(q, []byte("fresh"), "")
	c.MustPull(q, msgWait, "timed-out")
	c.MustPull(q, msgWait, "fresh")
}

// testLongPollWakesOnPush: a pull without t (and one with a long t) waits
// until a push and then answers promptly; several waiters get one message each.
func testLongPollWakesOnPush(t *testing.T, c *Client) {
	const q = "sem-long-poll"
	c.PullEmpty(q, "0") // create the queue
	for _, path := range []string{"/messages/" + q, "/messages/" + q + "?t=20"} {
		polls := startPolls(c, path, 3)
		// A lower bound only: the gateway is shared with the other cases.
		awaitWaitingPulls(t, c, 3)
		select {
		case res := <-polls:
			t.Fatalf("GET %s answered before any push: %v %v", path, res.r, res.err)
		default:
		}
		want := map[string]bool{}
		for i := range 3 {
			b := fmt.Sprintf("wake-%d", i)
			want[b] = true
			c.Push(q, []byte(b), "")
		}
		for range 3 {
			res := <-polls
			if res.err != nil {
				t.Fatalf("GET %s: %v", path, res.err)
			}
			ExpectMessage(t, res.r, q, string(res.r.Body))
			if !want[string(res.r.Body)] {
				t.Fatalf("GET %s: unexpected or repeated body %q", path, res.r.Body)
			}
			delete(want, string(res.r.Body))
			c.ExpectReply(http.StatusNoContent, q, res.r.ID(), "ack")
		}
	}
}

// testDisconnectWhileWaiting: clients that give up a long-poll neither take
// a message with them nor leave it stuck, whether the push comes a while
// after they left or right after (when the gateway's HTTP server may not yet
// have read their FIN: the gateway must notice the closed socket anyway).
// The abandoned polls are raw TCP connections closed by the test, so that
// "left" means the FIN was sent (an HTTP client's cancel closes its
// connection when it gets to it, which may be after the push).
func testDisconnectWhileWaiting(t *testing.T, c *Client) {
	const q = "sem-disconnect"
	c.PullEmpty(q, "0")
	for round, settle := range []bool{true, false} {
		conns := make([]net.Conn, 3)
		for i := range conns {
			conn, err := net.Dial("tcp", strings.TrimPrefix(c.url(), "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := fmt.Fprintf(conn, "GET /messages/%s HTTP/1.1\r\nHost: lmq\r\n\r\n", q); err != nil {
				t.Fatal(err)
			}
			conns[i] = conn
		}
		awaitWaitingPulls(t, c, len(conns))
		for _, conn := range conns {
			// Nothing was answered, and now the client leaves.
			_ = conn.SetReadDeadline(time.Now())
			if n, err := conn.Read(make([]byte, 1)); n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("round %d: an abandoned long-poll got an answer (%d bytes, %v)", round, n, err)
			}
			if err := conn.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if settle {
			// Round 0: the gateway has seen the clients go (their pulls no
			// longer wait). Round 1 races the FINs on purpose.
			awaitPullsOn(t, c, q, 0)
		}
		body := fmt.Sprintf("after-disconnect-%d", round)
		c.Push(q, []byte(body), "")
		// Stuck with a vanished client, it would come back only after
		// the 30s timeout, beyond msgWait.
		r := c.MustPull(q, msgWait, body)
		if r.Retry() != 2 {
			t.Errorf("round %d: retry-remaining %d, want 2 (a vanished client costs no retry)", round, r.Retry())
		}
		c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
		c.PullEmpty(q, "0")
	}
}

type pollResult struct {
	r   *Response
	err error
}

// startPolls starts n concurrent GETs of path, bounded by requestTimeout, and
// returns their results as they come.
func startPolls(c *Client, path string, n int) <-chan pollResult {
	ch := make(chan pollResult, n)
	for range n {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
			defer cancel()
			r, err := c.Send(ctx, http.MethodGet, path, nil)
			ch <- pollResult{r, err}
		}()
	}
	return ch
}

// sleepUntil lets the clock reach at: the semantics under test are timers.
func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }
