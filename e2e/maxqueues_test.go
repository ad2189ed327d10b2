package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// Issue 25, finding 8: nothing bounded the number of queues (a client made
// 16,000 in six seconds). With --max-queues N, every request that would
// create queue N+1 (a push, a batch, a properties update, a pull, over HTTP
// or RPC) is refused with 409 naming the limit and changes nothing, while
// the queues that exist work as before; deleting one makes room.

// maxQueuesWant is the text every refusal names.
const maxQueuesWant = "max-queues limit is 5"

// expectRefused checks a 409 that names the limit.
func expectRefused(t *testing.T, what string, r *Response) {
	t.Helper()
	if r.Status != http.StatusConflict || !strings.Contains(string(r.Body), maxQueuesWant) {
		t.Fatalf("%s: %v, want 409 naming the limit (%q)", what, r, maxQueuesWant)
	}
}

func TestMaxQueues(t *testing.T) {
	t.Parallel()
	gw, c := StartClient(t, "--max-queues", "5")
	rpc := dialRPC(t, gw.RPCAddr)
	batch := func(queue string) *Response {
		body := "--XX\r\ncontent-type: text/plain\r\n\r\none\r\n--XX\r\ncontent-type: text/plain\r\n\r\ntwo\r\n--XX--\r\n"
		return c.Do(http.MethodPost, "/messages/"+Q(queue)+"?batch=1", []byte(body), "Content-Type", "multipart/mixed; boundary=XX")
	}

	// Five queues, made by as many paths.
	c.Push("mq/1", []byte("one"), "text/plain")
	if r := batch("mq/2"); r.Status != http.StatusOK {
		t.Fatalf("batch into a new queue: %v", r)
	}
	c.PatchProps("mq/3", `{"retry":3}`)
	rpc.MustOK("push", "mq/4", "four")
	c.PullEmpty("mq/5", "0")
	for i := 1; i <= 5; i++ {
		c.Expect(http.StatusOK, http.MethodGet, "/queues/"+Q(fmt.Sprintf("mq/%d", i)), nil)
	}

	// A sixth: refused on every path, and nothing of it is left behind.
	expectRefused(t, "push", c.Do(http.MethodPost, "/messages/mq%2F6", []byte("six"), "Content-Type", "text/plain"))
	expectRefused(t, "push with priority", c.Do(http.MethodPost, "/messages/mq%2F6?priority=3", []byte("six"), "Content-Type", "text/plain"))
	expectRefused(t, "batch", batch("mq/6"))
	expectRefused(t, "properties", c.Do(http.MethodPatch, "/properties/mq%2F6", []byte(`{"retry":9}`), "Content-Type", "application/json"))
	expectRefused(t, "pull", c.Do(http.MethodGet, "/messages/mq%2F6?t=0", nil))
	if e := rpc.MustFail("push", "mq/6", "six"); !strings.HasPrefix(e, "too_many_queues") || !strings.Contains(e, maxQueuesWant) {
		t.Fatalf("rpc push into a sixth queue: error %q, want too_many_queues naming the limit", e)
	}
	if e := rpc.MustFail("update_props", "mq/6", map[string]any{"retry": 9}); !strings.Contains(e, maxQueuesWant) {
		t.Fatalf("rpc update_props of a sixth queue: error %q, want one naming the limit", e)
	}
	c.Expect(http.StatusNotFound, http.MethodGet, "/queues/mq%2F6", nil)
	if p := c.Props("mq/6"); strings.Contains(p, `"retry":9`) {
		t.Fatalf("a refused queue's properties were stored: %s", p)
	}

	// The queues that exist work as before.
	c.Push("mq/1", []byte("again"), "text/plain")
	if r := batch("mq/2"); r.Status != http.StatusOK {
		t.Fatalf("batch into an existing queue: %v", r)
	}
	c.PatchProps("mq/3", `{"retry":4}`)
	rpc.MustOK("push", "mq/4", "again")
	c.Push("mq/5", []byte("five"), "text/plain")
	c.MustPull("mq/1", msgWait, "one")
	c.MustPull("mq/5", msgWait, "five")
	// Push to all (qre) reaches the existing ones and creates none.
	c.Expect(http.StatusOK, http.MethodPost, "/messages?qre="+Q("^mq/"), []byte("all"), "Content-Type", "text/plain")

	// Deleting one makes room for one.
	c.Expect(http.StatusNoContent, http.MethodDelete, "/queues/mq%2F1", nil)
	c.Push("mq/6", []byte("six"), "text/plain")
	c.MustPull("mq/6", msgWait, "six")
	expectRefused(t, "push into a seventh queue", c.Do(http.MethodPost, "/messages/mq%2F7", []byte("seven"), "Content-Type", "text/plain"))
}

// TestMaxQueuesAcrossGateways: the count is the registry every gateway on
// the JetStream shares, so queues made through one gateway count against
// another's limit (once its mirror of the registry has them: a moment).
func TestMaxQueuesAcrossGateways(t *testing.T) {
	t.Parallel()
	url := StartNATS(t)
	a := StartWithNATS(t, url, "--max-queues", "5").Client(t)
	b := StartWithNATS(t, url, "--max-queues", "5").Client(t)
	for i := range 5 {
		a.Push(fmt.Sprintf("shared/%d", i), []byte("x"), "text/plain")
	}
	testwait.WithinDetail(t, 30*time.Second, "the other gateway to list the five queues", func() (bool, string) {
		r := b.Expect(http.StatusOK, http.MethodGet, "/queues", nil)
		return strings.Count(string(r.Body), "shared/") == 5, string(r.Body)
	})
	expectRefused(t, "a sixth queue through the other gateway", b.Do(http.MethodPost, "/messages/shared%2F6", []byte("six"), "Content-Type", "text/plain"))
	b.Push("shared/0", []byte("y"), "text/plain") // an existing queue
	b.Expect(http.StatusNoContent, http.MethodDelete, "/queues/shared%2F0", nil)
	testwait.WithinDetail(t, 30*time.Second, "the first gateway to have room again", func() (bool, string) {
		r := a.Do(http.MethodPost, "/messages/shared%2F7", []byte("seven"), "Content-Type", "text/plain")
		return r.Status == http.StatusOK, r.String()
	})
}
