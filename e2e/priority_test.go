package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"testing"
)

// TestPriorityOrder: pushes with priorities over HTTP and RPC, a nack, a
// timeout and a restart of the gateway in the middle; the pull order is
// strictly by priority, higher first, and within a priority LMQ's order,
// nacked and timed-out messages at the tail of their own priority.
func TestPriorityOrder(t *testing.T) {
	t.Parallel()
	gw, c := StartClient(t)
	const q = "prio/q"
	c.PatchProps(q, `{"timeout":1}`)

	pushHTTP := func(body string, p int) {
		t.Helper()
		path := "/messages/" + Q(q)
		if p >= 0 {
			path += "?priority=" + strconv.Itoa(p)
		}
		ExpectJSON(t, c.Expect(http.StatusOK, http.MethodPost, path, []byte(body), "Content-Type", "text/plain"), `{"accum":"no"}`)
	}
	rpc := dialRPC(t, gw.RPCAddr)
	pushRPC := func(body string, p int) {
		t.Helper()
		if p >= 0 {
			rpc.MustOK("push", q, body, map[string]any{"priority": p})
		} else {
			rpc.MustOK("push", q, body)
		}
	}
	// pull pulls over HTTP and checks the body (an RPC push's content comes
	// back MessagePack-encoded: a short str ends with its bytes) and the
	// priority header; it returns the delivery id.
	pull := func(body string, p int) string {
		t.Helper()
		r := c.Pull(q, msgWait)
		if r.Status != http.StatusOK || !bytes.HasSuffix(r.Body, []byte(body)) {
			t.Fatalf("pull: got %v, want %q", r, body)
		}
		want := ""
		if p > 0 {
			want = strconv.Itoa(p)
		}
		if got := r.Header.Get("x-lmq-priority"); got != want {
			t.Fatalf("pull %q: x-lmq-priority %q, want %q", body, got, want)
		}
		return r.ID()
	}

	pushHTTP("a0", -1)
	pushHTTP("b5", 5)
	pushRPC("c5", 5)
	pushHTTP("d2", 2)
	pushRPC("e0", -1)
	pushRPC("f9", 9)
	pushHTTP("g5", 5)

	// A nacked message goes to the tail of its priority: alone at 9, it
	// comes again at once.
	id := pull("f9", 9)
	if st := c.Reply(q, id, "nack"); st != http.StatusNoContent {
		t.Fatalf("nack: %d", st)
	}
	id = pull("f9", 9)
	if st := c.Reply(q, id, "ack"); st != http.StatusNoContent {
		t.Fatalf("ack: %d", st)
	}
	// b5 times out: behind c5 and g5.
	pull("b5", 5)
	awaitNoneInFlight(t, c)
	// c5, pulled over RPC (its map has a priority key), is nacked: behind
	// g5 and b5.
	res, ok := rpc.Must("pull", q, 5).(mpMap)
	if !ok {
		t.Fatalf("rpc pull: %v", res)
	}
	content, _ := res.get("content")
	prio, _ := res.get("priority")
	rid, _ := res.get("id")
	if fmt.Sprint(mpNormalize(content)) != "c5" || fmt.Sprint(prio) != "5" {
		t.Fatalf("rpc pull: %v", res)
	}
	rpc.MustOK("release", q, rid)
	pushHTTP("h5", 5)

	// A restart in the middle: the priorities live in the stream.
	gw.Restart()
	c = gw.Client(t)
	for _, x := range []struct {
		body string
		p    int
	}{{"g5", 5}, {"b5", 5}, {"c5", 5}, {"h5", 5}, {"d2", 2}, {"a0", 0}, {"e0", 0}} {
		if st := c.Reply(q, pull(x.body, x.p), "ack"); st != http.StatusNoContent {
			t.Fatalf("ack %s: %d", x.body, st)
		}
	}
	c.PullEmpty(q, "0")

	// Without priorities, an RPC delivery is LMQ's exact map.
	rpc = dialRPC(t, gw.RPCAddr)
	rpc.MustOK("push", q, "plain")
	if m := rpc.MustPull("pull", q, 5); fmt.Sprint(mpNormalize(m.Content)) != "plain" {
		t.Fatalf("plain: %+v", m)
	}

	// Bad priorities are refused and the gateway keeps serving.
	for _, bad := range []string{"10", "-1", "x", "1.5", "+1"} {
		c.Expect(http.StatusBadRequest, http.MethodPost, "/messages/"+Q(q)+"?priority="+bad, []byte("x"))
	}
	c.Expect(http.StatusBadRequest, http.MethodPatch, "/properties/"+Q(q), []byte(`{"priority":10}`), "Content-Type", "application/json")
	if msg := rpc.MustFail("push", q, "x", map[string]any{"priority": 10}); msg == "" {
		t.Fatal("rpc priority 10 accepted")
	}
	// Refused rather than ignored: with batch, and on accumulating queues.
	c.Expect(http.StatusBadRequest, http.MethodPost, "/messages/"+Q(q)+"?batch=1&priority=3", []byte("x"), "Content-Type", "application/x-msgpack")
	c.PatchProps("prio/acc", `{"accum":5}`)
	c.Expect(http.StatusBadRequest, http.MethodPost, "/messages/"+Q("prio/acc")+"?priority=3", []byte("x"))
	// The property: the default priority of pushes without one.
	c.PatchProps(q, `{"priority":3}`)
	if got := c.Props(q); got != `{"accum":0,"priority":3,"retry":2,"timeout":1}` {
		t.Fatalf("props %s", got)
	}
	pushHTTP("i0", 0)
	pushHTTP("j3", -1)
	for _, x := range []struct {
		body string
		p    int
	}{{"j3", 3}, {"i0", 0}} {
		c.Reply(q, pull(x.body, x.p), "ack")
	}
}
