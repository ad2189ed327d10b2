package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// queueSizes reads GET /queues/{name}.
func queueSizes(t testing.TB, c *Client, queue string) (out struct {
	Size        uint64 `json:"size"`
	InFlight    uint64 `json:"in_flight"`
	Delayed     uint64 `json:"delayed"`
	DeadLetters uint64 `json:"dead_letters"`
	Parts       uint64 `json:"accumulating"`
}) {
	t.Helper()
	r := c.Expect(http.StatusOK, http.MethodGet, "/queues/"+Q(queue), nil)
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("GET /queues/%s: %v: %s", queue, err, r.Body)
	}
	return out
}

// TestPurge: DELETE /queues/{name}/messages removes every waiting message
// (plain, prioritized, delayed) and the deliveries in flight, and keeps the
// queue's properties and dead letters; a delivery in flight at the purge
// is acked with 204, a nacked one is not delivered again; the queue works
// after. An unknown queue is 404.
func TestPurge(t *testing.T) {
	t.Parallel()
	_, c := StartClient(t)
	const q = "purge/jobs"

	// A dead letter: retries are fixed at push, so the queue keeps none for
	// it, and more for the messages pushed after.
	c.PatchProps(q, `{"dead_letter":true,"retry":0}`)
	c.Push(q, []byte("dead"), "text/plain")
	c.ExpectReply(http.StatusNoContent, q, c.MustPull(q, msgWait, "dead").ID(), "nack")
	c.PatchProps(q, `{"retry":2,"timeout":60}`)
	props := c.Props(q)

	c.Push(q, []byte("to ack"), "text/plain")
	c.Push(q, []byte("to nack"), "text/plain")
	toAck := c.MustPull(q, msgWait, "to ack")
	toNack := c.MustPull(q, msgWait, "to nack")
	c.Push(q, []byte("waiting"), "text/plain")
	c.PushPath("/messages/"+Q(q)+"?priority=7", []byte("urgent"), "text/plain")
	c.PushPath("/messages/"+Q(q)+"?delay=3600", []byte("later"), "text/plain")
	if s := queueSizes(t, c, q); s.Size != 4 || s.InFlight != 2 || s.Delayed != 1 || s.DeadLetters != 1 {
		t.Fatalf("before the purge: %+v", s)
	}

	c.Expect(http.StatusNoContent, http.MethodDelete, "/queues/"+Q(q)+"/messages", nil)
	if s := queueSizes(t, c, q); s.Size != 0 || s.InFlight != 0 || s.Delayed != 0 || s.DeadLetters != 1 {
		t.Fatalf("after the purge: %+v", s)
	}
	if got := c.Props(q); got != props {
		t.Fatalf("properties after the purge: %s, want %s", got, props)
	}
	c.ExpectReply(http.StatusNoContent, q, toAck.ID(), "ack")
	c.ExpectReply(http.StatusNoContent, q, toNack.ID(), "nack")
	awaitNoneInFlight(t, c)
	c.PullEmpty(q, "0")
	if s := queueSizes(t, c, q); s.Size != 0 || s.DeadLetters != 1 {
		t.Fatalf("after the replies: %+v", s)
	}
	head := c.Expect(http.StatusOK, http.MethodGet, "/queues/"+Q(q)+"/dead/head", nil)
	if string(head.Body) != "dead" {
		t.Fatalf("dead letter after the purge: %q", head.Body)
	}

	// The queue works after: push and pull again.
	c.Push(q, []byte("after"), "text/plain")
	c.ExpectReply(http.StatusNoContent, q, c.MustPull(q, msgWait, "after").ID(), "ack")

	c.Expect(http.StatusNotFound, http.MethodDelete, "/queues/"+Q("purge/nosuch")+"/messages", nil)
	c.Expect(http.StatusNotFound, http.MethodGet, "/queues/"+Q("purge/nosuch"), nil) // not created
	c.Expect(http.StatusMethodNotAllowed, http.MethodPost, "/queues/"+Q(q)+"/messages", nil)
}

// TestPurgeAccumulating: the parts of an open accumulation window are
// purged; the window goes on with the pushes that follow, and its compound
// holds only those.
func TestPurgeAccumulating(t *testing.T) {
	t.Parallel()
	_, c := StartClient(t)
	const q = "purge/acc"
	c.PatchProps(q, `{"accum":1}`)
	ExpectJSON(t, c.Expect(http.StatusOK, http.MethodPost, "/messages/"+Q(q), []byte("purged-part")), `{"accum":"new"}`)
	c.Expect(http.StatusNoContent, http.MethodDelete, "/queues/"+Q(q)+"/messages", nil)
	if s := queueSizes(t, c, q); s.Parts != 0 {
		t.Fatalf("parts after the purge: %+v", s)
	}
	// Joins the window, or opens the next one if it closed meanwhile.
	c.Expect(http.StatusOK, http.MethodPost, "/messages/"+Q(q), []byte("kept-part"))
	r := c.Pull(q, msgWait)
	if r.Status != http.StatusOK || r.Header.Get("x-lmq-message-type") != "compound" {
		t.Fatalf("pull: %v", r)
	}
	if body := string(r.Body); !strings.Contains(body, "kept-part") || strings.Contains(body, "purged-part") {
		t.Fatalf("compound after the purge: %q", body)
	}
	c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	// A compound of the purged part would have been stored before this one
	// (windows store theirs in order), so it would be here now.
	c.PullEmpty(q, "0")
}

// TestPurgeTwoGateways: gateways sharing a JetStream: a purge through one
// removes what the other holds in flight; there an ack is 204 and a nack
// brings nothing back.
func TestPurgeTwoGateways(t *testing.T) {
	t.Parallel()
	url := StartNATS(t)
	c1, c2 := StartWithNATS(t, url).Client(t), StartWithNATS(t, url).Client(t)
	const q = "purge/shared"
	for _, b := range []string{"one", "two", "three"} {
		c1.Push(q, []byte(b), "text/plain")
	}
	one, two := c2.MustPull(q, msgWait, "one"), c2.MustPull(q, msgWait, "two")
	c1.Expect(http.StatusNoContent, http.MethodDelete, "/queues/"+Q(q)+"/messages", nil)
	c2.ExpectReply(http.StatusNoContent, q, one.ID(), "ack")
	c2.ExpectReply(http.StatusNoContent, q, two.ID(), "nack")
	awaitNoneInFlight(t, c2)
	c1.PullEmpty(q, "0")
	c2.PullEmpty(q, "0")
	c2.Push(q, []byte("after"), "text/plain")
	c1.ExpectReply(http.StatusNoContent, q, c1.MustPull(q, msgWait, "after").ID(), "ack")
}

// TestRPCPurge: purge(name) answers "ok" and empties the queue; a delivery
// in flight is still done; an unknown queue is not_found.
func TestRPCPurge(t *testing.T) {
	t.Parallel()
	_, c := rpcStartDialed(t)
	const q = "purge/rpc"
	c.MustOK("push", q, "in flight")
	c.MustOK("push", q, "waiting")
	m := c.MustPull("pull", q, 5)
	c.MustOK("purge", q)
	c.MustOK("done", q, m.ID)
	c.MustEmpty("pull", q, 0)
	if e := c.MustFail("purge", "purge/nosuch"); e != "not_found" {
		t.Fatalf("purge of an unknown queue: %q, want not_found", e)
	}
	c.MustOK("push", q, "after")
	if m := c.MustPull("pull", q, 5); m.Content != "after" {
		t.Fatalf("pull after the purge: %+v", m)
	}
}

// TestPurgeCluster: in a three-node JetStream cluster with R3 queues, a
// purge through one gateway removes what waits and what the other holds
// in flight; there an ack is 204 (the consumer is a Raft group: the ack of
// a purged message is still answered) and a nack brings nothing back.
func TestPurgeCluster(t *testing.T) {
	heavy(t, "a cluster")
	t.Parallel()
	servers, _ := StartNATSCluster(t, 3, nil)
	urls := ClientURLs(servers)
	a := StartWithNATS(t, urls, "--replicas", "3").Client(t)
	b := StartWithNATS(t, urls, "--replicas", "3").Client(t)
	const q = "purge/cluster"
	prepareQueue(t, a, q)
	for _, m := range []string{"one", "two", "three"} {
		a.Push(q, []byte(m), "text/plain")
	}
	a.PushPath("/messages/"+Q(q)+"?priority=3", []byte("urgent"), "text/plain")
	urgent, one := b.MustPull(q, msgWait, "urgent"), b.MustPull(q, msgWait, "one")
	a.Expect(http.StatusNoContent, http.MethodDelete, "/queues/"+Q(q)+"/messages", nil)
	b.ExpectReply(http.StatusNoContent, q, urgent.ID(), "ack")
	b.ExpectReply(http.StatusNoContent, q, one.ID(), "nack")
	awaitNoneInFlight(t, b)
	a.PullEmpty(q, "0")
	b.PullEmpty(q, "0")
	if s := queueSizes(t, a, q); s.Size != 0 || s.InFlight != 0 {
		t.Fatalf("after the purge: %+v", s)
	}
	b.Push(q, []byte("after"), "text/plain")
	a.ExpectReply(http.StatusNoContent, q, a.MustPull(q, msgWait, "after").ID(), "ack")
}
