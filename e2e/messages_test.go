package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// A queue's waiting messages by id (issue 27): GET /queues/{name}/messages
// and DELETE /queues/{name}/messages/{id}, and their RPC methods.

// waiting is one message of GET /queues/{name}/messages.
type waiting struct {
	ID          uint64  `json:"id"`
	Priority    int     `json:"priority"`
	Group       *string `json:"group"`
	ContentType string  `json:"content_type"`
	Size        int64   `json:"size"`
	Age         *float64
	Body        []byte `json:"body"`
}

// listWaiting lists the queue's waiting messages (query: "n=…&body=1" or "").
func listWaiting(t *testing.T, c *Client, queue, query string) []waiting {
	t.Helper()
	r := c.Expect(http.StatusOK, http.MethodGet, "/queues/"+Q(queue)+"/messages?"+query, nil)
	var out []waiting
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("list %q: %v: %s", queue, err, r.Body)
	}
	return out
}

func waitingBodies(ws []waiting) string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = string(w.Body)
	}
	return strings.Join(out, " ")
}

// TestWaitingMessagesHTTP: the list is in delivery order (priorities high
// to low, each in queue order), bodies only with body=1, without taking
// anything; a deleted waiting message is never delivered; one in flight is
// not found and its ack still works; a second delete is not found; bad n and
// ids are 400, an unknown queue 404.
func TestWaitingMessagesHTTP(t *testing.T) {
	t.Parallel()
	_, c := StartClient(t)
	const q = "wait/list"
	push := func(body string, p int) {
		t.Helper()
		c.Expect(http.StatusOK, http.MethodPost, fmt.Sprintf("/messages/%s?priority=%d", Q(q), p), []byte(body), "Content-Type", "text/plain")
	}
	push("a", 0)
	push("b", 3)
	push("c", 0)
	push("d", 9)

	ws := listWaiting(t, c, q, "")
	if len(ws) != 4 || ws[0].Body != nil || ws[0].Priority != 9 || ws[1].Priority != 3 || ws[0].ContentType != "text/plain" ||
		ws[0].Size != 1 || ws[0].Group != nil || ws[0].Age == nil {
		t.Fatalf("list: %+v", ws)
	}
	ws = listWaiting(t, c, q, "body=1")
	if got := waitingBodies(ws); got != "d b a c" {
		t.Fatalf("list with bodies: %s", got)
	}
	ids := map[string]uint64{}
	for _, w := range ws {
		ids[string(w.Body)] = w.ID
	}
	if got := waitingBodies(listWaiting(t, c, q, "n=2&body=1")); got != "d b" {
		t.Fatalf("list n=2: %s", got)
	}
	if r := c.Expect(http.StatusOK, http.MethodGet, "/queues/"+Q(q), nil); !strings.Contains(string(r.Body), `"size":4`) {
		t.Fatalf("the list took something: %s", r.Body)
	}

	del := func(status int, id string) {
		t.Helper()
		c.Expect(status, http.MethodDelete, "/queues/"+Q(q)+"/messages/"+id, nil)
	}
	id := func(body string) string { return strconv.FormatUint(ids[body], 10) }

	inFlight := c.MustPull(q, msgWait, "d")
	del(http.StatusNotFound, id("d"))
	del(http.StatusNoContent, id("b"))
	del(http.StatusNotFound, id("b"))
	if got := waitingBodies(listWaiting(t, c, q, "body=1")); got != "a c" {
		t.Fatalf("list after the delete: %s", got)
	}
	c.ExpectReply(http.StatusNoContent, q, inFlight.ID(), "ack")
	c.MustPull(q, msgWait, "a") // b is not delivered
	r := c.MustPull(q, msgWait, "c")
	c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	c.PullEmpty(q, "0")

	for _, bad := range []string{"0", "-1", "x", "1.5", "18446744073709551616"} {
		del(http.StatusBadRequest, bad)
	}
	for _, bad := range []string{"n=0", "n=x", "n=51", "n=-3", "body=2"} {
		c.Expect(http.StatusBadRequest, http.MethodGet, "/queues/"+Q(q)+"/messages?"+bad, nil)
	}
	c.Expect(http.StatusNotFound, http.MethodGet, "/queues/wait%2Fnone/messages", nil)
	c.Expect(http.StatusNotFound, http.MethodDelete, "/queues/wait%2Fnone/messages/1", nil)
}

// TestWaitingMessagesRPC: messages and delete_message over MessagePack-RPC
// see and remove the same messages as HTTP.
func TestWaitingMessagesRPC(t *testing.T) {
	t.Parallel()
	gw, c := StartClient(t)
	rpc := dialRPC(t, gw.RPCAddr)
	const q = "wait/rpc"
	rpc.MustOK("push", q, "one")
	rpc.MustOK("push", q, "two", map[string]any{"priority": 2})

	list, ok := rpc.Must("messages", q, 10, map[string]any{"body": true}).([]any)
	if !ok || len(list) != 2 {
		t.Fatalf("messages: %s", rpcShort(list))
	}
	first, _ := list[0].(mpMap)
	content, _ := first.get("content")
	prio, _ := first.get("priority")
	rawID, _ := first.get("id")
	if content != "two" || fmt.Sprint(prio) != "2" {
		t.Fatalf("first: %s", rpcShort(first))
	}
	ws := listWaiting(t, c, q, "")
	if fmt.Sprint(rawID) != strconv.FormatUint(ws[0].ID, 10) {
		t.Fatalf("RPC id %v, HTTP id %d", rawID, ws[0].ID)
	}
	rpc.MustOK("delete_message", q, rawID)
	if e := rpc.MustFail("delete_message", q, rawID); e != "not_found" {
		t.Fatalf("delete twice: %q", e)
	}
	if e := rpc.MustFail("delete_message", q, 0); !strings.HasPrefix(e, "badarg") {
		t.Fatalf("delete id 0: %q", e)
	}
	if e := rpc.MustFail("messages", q, 0); !strings.HasPrefix(e, "badarg") {
		t.Fatalf("messages n=0: %q", e)
	}
	m := rpc.MustPull("pull", q, 5)
	if m.Content != "one" {
		t.Fatalf("pulled %s", rpcShort(m.Content))
	}
	rpc.MustOK("done", q, m.ID)
	rpc.MustEmpty("pull", q, 0)
}

// TestConsoleDeleteMessage: the queue page shows a waiting message's group
// and deletes one message with its button, after a confirmation; the
// message is gone from the page and from the queue.
func TestConsoleDeleteMessage(t *testing.T) {
	t.Parallel()
	g, c := StartClient(t)
	b := newBrowser(t, g.HTTP)
	const q = "wait/console"
	for _, body := range []string{"x", "y", "z"} {
		c.Push(q, []byte(body), "text/plain")
	}
	// A grouped message as the push side stores it: on its group's backlog,
	// and copied to the group's head subject.
	_, js := natsClient(t, g)
	ctx := t.Context()
	backlog := nats.NewMsg(mapping.GroupSubject(q, "order-42"))
	backlog.Header.Set(mapping.HdrGroup, "order-42")
	backlog.Data = []byte("grouped")
	ack, err := js.PublishMsg(ctx, backlog)
	if err != nil {
		t.Fatal(err)
	}
	head := nats.NewMsg(mapping.HeadSubject(q, "order-42"))
	head.Header.Set(mapping.HdrGroup, "order-42")
	head.Header.Set(mapping.HdrGroupSeq, strconv.FormatUint(ack.Sequence, 10))
	head.Data = []byte("grouped")
	if _, err := js.PublishMsg(ctx, head); err != nil {
		t.Fatal(err)
	}

	ws := listWaiting(t, c, q, "body=1")
	if got := waitingBodies(ws); got != "x y z grouped" || ws[3].Group == nil || *ws[3].Group != "order-42" {
		t.Fatalf("list: %s %+v", got, ws)
	}
	y := strconv.FormatUint(ws[1].ID, 10)

	b.open("#/queue/" + Q(q))
	b.waitJS("four previewed messages", `document.querySelectorAll('#peek article').length === 4`)
	b.waitContains(`#peek article:nth-of-type(4) .group`, "order-42")
	b.labelled("queue")
	b.click(`#peek button[data-delete="` + y + `"]`)
	b.click(`#peek article[data-seq="` + y + `"] button[data-confirm="yes"]`)
	b.waitJS("the deleted message gone from the page",
		`document.querySelectorAll('#peek article').length === 3 && !document.querySelector('#peek article[data-seq="`+y+`"]')`)
	b.noErrors()
	if got := waitingBodies(listWaiting(t, c, q, "body=1")); got != "x z grouped" {
		t.Fatalf("list after the delete: %s", got)
	}
}
