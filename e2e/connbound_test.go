package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// Deliveries bound to a connection (issue 18): with the queue property
// release_on_disconnect (RPC) or the pull header X-Lmq-Release-On-Disconnect
// (HTTP), a delivery whose connection closes before the reply returns to the
// queue at once instead of after the queue's timeout, its retry not used.

// releaseWait is how long the second client waits for the released
// messages: far below the queues' timeout of 60 s, so a message that comes
// within it was released, not timed out. A correctness bound, not a speed
// requirement: the release is immediate.
const releaseWait = 20

// TestConnBoundRPC: an RPC client pulls deliveries of a queue with timeout
// 60 and release_on_disconnect, acks one and is killed (its TCP connection
// closed); another client gets the others again long before the timeout,
// with their retries intact, and not the acked one. On a queue without the
// property the delivery stays with the dead client (LMQ's behaviour).
func TestConnBoundRPC(t *testing.T) {
	t.Parallel()
	gw, c := StartClient(t)
	a := dialRPC(t, gw.RPCAddr)
	a.MustOK("update_props", "bound", map[string]any{"timeout": 60, "release_on_disconnect": true})
	c.Expect(http.StatusNoContent, http.MethodPatch, "/properties/plain", []byte(`{"timeout":60}`), "Content-Type", "application/json")
	r := c.Expect(http.StatusOK, http.MethodGet, "/properties/bound", nil)
	ExpectJSON(t, r, `{"accum":0,"release_on_disconnect":true,"retry":2,"timeout":60}`)

	for i := range 4 {
		a.MustOK("push", "bound", fmt.Sprintf("m%d", i))
	}
	a.MustOK("push", "plain", "p0")
	var acked string
	for i := range 4 {
		m := a.MustPull("pull", "bound", 5)
		if m.Retry != 2 {
			t.Fatalf("first delivery retry %d, want 2", m.Retry)
		}
		if i == 0 {
			a.MustOK("done", "bound", m.ID)
			acked = fmt.Sprint(m.Content)
		}
	}
	a.MustPull("pull", "plain", 5)
	// Kill the client: its socket closes with three deliveries of "bound"
	// and one of "plain" unanswered.
	a.Close()

	b := dialRPC(t, gw.RPCAddr)
	got := map[string]bool{}
	for range 3 {
		m := b.MustPull("pull", "bound", releaseWait)
		body := fmt.Sprint(m.Content)
		if body == acked {
			t.Fatalf("the acked message %q came back", body)
		}
		if got[body] {
			t.Fatalf("%q delivered twice", body)
		}
		got[body] = true
		// Not counted as a retry: the release is the client's leaving, as
		// for a client that left while waiting.
		if m.Retry != 2 {
			t.Errorf("%s: retry %d after the release, want 2 (a retry was used)", body, m.Retry)
		}
		b.MustOK("done", "bound", m.ID)
	}
	b.MustEmpty("pull", "bound", 0)

	// The property off: the delivery of the killed client is not released;
	// it waits for its timeout of 60 s. The "bound" messages above came back
	// at once, so a few seconds show it is not coming early.
	b.MustEmpty("pull", "plain", 3)
	awaitMetric(t, c, "lmq_deliveries_in_flight", "the unbound delivery still in flight", func(v float64) bool { return v == 1 })
}

// rawPull sends a pull on conn (kept alive) and reads its answer; the body
// is in the X-Test-Body header of the result.
func rawPull(t *testing.T, conn net.Conn, br *bufio.Reader, path string, hdr ...string) *http.Response {
	t.Helper()
	req := "GET " + path + " HTTP/1.1\r\nHost: x\r\n"
	for i := 0; i+1 < len(hdr); i += 2 {
		req += hdr[i] + ": " + hdr[i+1] + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp.Header.Set("X-Test-Body", string(body))
	return resp
}

// TestConnBoundHTTP: a pull with X-Lmq-Release-On-Disconnect: 1 on a
// kept-alive connection binds its delivery to that connection; when the
// connection closes unanswered, the message is available again at once,
// with its retries intact. A delivery acked on the connection does not come
// back; one pulled without the header stays until its timeout.
func TestConnBoundHTTP(t *testing.T) {
	t.Parallel()
	gw, c := StartClient(t)
	c.Expect(http.StatusNoContent, http.MethodPatch, "/properties/hq", []byte(`{"timeout":60}`), "Content-Type", "application/json")
	for _, body := range []string{"h0", "h1", "h2"} {
		c.Push("hq", []byte(body), "text/plain")
	}
	const hdr = "X-Lmq-Release-On-Disconnect"

	// Refused: a value that is not a boolean, a connection about to close.
	c.Expect(http.StatusBadRequest, http.MethodGet, "/messages/hq?t=0", nil, hdr, "yes")
	c.Expect(http.StatusBadRequest, http.MethodGet, "/messages/hq?t=0", nil, hdr, "1", "Connection", "close")

	conn, err := net.Dial("tcp", strings.TrimPrefix(gw.HTTP, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	first := rawPull(t, conn, br, "/messages/hq?t=5", hdr, "1")
	second := rawPull(t, conn, br, "/messages/hq?t=5", hdr, "true")
	for _, r := range []*http.Response{first, second} {
		if r.StatusCode != http.StatusOK || r.Header.Get("X-Lmq-Retry-Remaining") != "2" {
			t.Fatalf("bound pull: %d %v", r.StatusCode, r.Header)
		}
	}
	// The second is acked on the same connection: it is done, not bound.
	id := second.Header.Get("X-Lmq-Message-Id")
	if _, err := io.WriteString(conn, "POST /messages/hq/"+id+"?reply=ack HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("ack on the bound connection: %d", resp.StatusCode)
	}
	// The third without the header: LMQ's behaviour.
	third := rawPull(t, conn, br, "/messages/hq?t=5")
	if third.StatusCode != http.StatusOK {
		t.Fatalf("plain pull: %d", third.StatusCode)
	}
	conn.Close()

	r := c.Pull("hq", fmt.Sprint(releaseWait))
	if r.Status != http.StatusOK {
		t.Fatalf("the bound delivery was not released when its connection closed: %v", r)
	}
	if got, want := r.Header.Get("X-Lmq-Message-Id"), first.Header.Get("X-Lmq-Message-Id"); got == want {
		t.Errorf("released message came back with the old delivery id")
	}
	if want := first.Header.Get("X-Test-Body"); string(r.Body) != want {
		t.Fatalf("released %q, want the bound delivery's %q", r.Body, want)
	}
	if rr := r.Header.Get("X-Lmq-Retry-Remaining"); rr != "2" {
		t.Errorf("released message: x-lmq-retry-remaining %s, want 2 (a retry was used)", rr)
	}
	c.ExpectReply(http.StatusNoContent, "hq", r.Header.Get("X-Lmq-Message-Id"), "ack")
	// Neither the acked one nor the unbound one is back.
	c.PullEmpty("hq", "3")
}
