package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/vmihailenco/msgpack/v5"
)

// The features beyond LMQ (issue 9): delay, ttl, dead letters, batch push,
// queue introspection. Each must leave what an LMQ client sees unchanged.

func TestBeyondDelaySurvivesRestart(t *testing.T) {
	t.Parallel()
	gw, c := StartClient(t)
	start := time.Now()
	r := c.Expect(http.StatusOK, http.MethodPost, "/messages/"+Q("delay/q")+"?delay=4", []byte("later"), "Content-Type", "text/plain")
	ExpectJSON(t, r, `{"accum":"no"}`)
	// The delay is long enough for these three requests to come before
	// its end even on a slow machine.
	c.Push("delay/q", []byte("now"), "text/plain")
	// Acked: a delivery left in flight would come back at once after the
	// restart (the consumer's state is in memory), ahead of "later".
	now := c.MustPull("delay/q", "0", "now")
	c.ExpectReply(http.StatusNoContent, "delay/q", now.ID(), "ack")
	c.PullEmpty("delay/q", "0")
	var detail struct {
		Size    int `json:"size"`
		Delayed int `json:"delayed"`
	}
	if err := json.Unmarshal(c.Expect(http.StatusOK, http.MethodGet, "/queues/"+Q("delay/q"), nil).Body, &detail); err != nil || detail.Delayed != 1 {
		t.Fatalf("detail %+v %v", detail, err)
	}
	gw.Kill()
	gw.Restart()
	c = gw.Client(t)
	r = c.MustPull("delay/q", msgWait, "later")
	if time.Since(start) < 4*time.Second || r.Header.Get("Content-Type") != "text/plain" || r.Retry() != 2 {
		t.Fatalf("delayed message after %v: %v", time.Since(start), r)
	}
	c.Expect(http.StatusBadRequest, http.MethodPost, "/messages/"+Q("delay/q")+"?delay=-1", []byte("x"))
	c.Expect(http.StatusBadRequest, http.MethodPost, "/messages/"+Q("delay/q")+"?delay=abc", []byte("x"))
}

func TestBeyondTTL(t *testing.T) {
	t.Parallel()
	_, c := StartClient(t)
	c.Expect(http.StatusOK, http.MethodPost, "/messages/ttl?ttl=0.3", []byte("expires"))
	c.Push("ttl", []byte("stays"), "")
	testwait.For(t, "queueDetail(t, c, \"ttl\").Size == 1", func() bool { return queueDetail(t, c, "ttl").Size == 1 }) // "expires" expired
	c.MustPull("ttl", "1", "stays")
	c.PullEmpty("ttl", "0")

	c.PatchProps("ttl2", `{"ttl":0.3}`)
	if got := c.Props("ttl2"); got != `{"accum":0,"retry":2,"timeout":30,"ttl":0.3}` {
		t.Fatalf("props %s", got)
	}
	c.Push("ttl2", []byte("x"), "")
	testwait.For(t, "queueDetail(t, c, \"ttl2\").Size == 0", func() bool { return queueDetail(t, c, "ttl2").Size == 0 })
	c.PullEmpty("ttl2", "0")
	// A queue without the new properties shows LMQ's exact text.
	if got := c.Props("plain"); got != `{"accum":0,"retry":2,"timeout":30}` {
		t.Fatalf("LMQ props text changed: %s", got)
	}
}

func TestBeyondDeadLettersSurviveRestart(t *testing.T) {
	t.Parallel()
	gw, c := StartClient(t)
	c.PatchProps("dlq", `{"retry":0,"dead_letter":true}`)
	for _, body := range []string{"a", "b", "c"} {
		c.Push("dlq", []byte(body), "text/plain")
	}
	for _, body := range []string{"a", "b", "c"} {
		r := c.MustPull("dlq", "1", body)
		if st := c.Reply("dlq", r.ID(), "nack"); st != http.StatusNoContent {
			t.Fatalf("nack: %d", st)
		}
	}
	c.PullEmpty("dlq", "0")
	testwait.For(t, "3 dead letters in dlq", func() bool {
		return string(c.Expect(http.StatusOK, http.MethodGet, "/queues/dlq/dead", nil).Body) == `{"size":3}`
	})
	gw.Kill()
	gw.Restart()
	c = gw.Client(t)
	head := c.Expect(http.StatusOK, http.MethodGet, "/queues/dlq/dead/head", nil)
	if string(head.Body) != "a" || head.Header.Get("x-lmq-deliveries") != "1" || head.Header.Get("x-lmq-dead-at") == "" || head.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("head %v", head)
	}
	ExpectJSON(t, c.Expect(http.StatusOK, http.MethodPost, "/queues/dlq/dead/respawn?n=2", nil), `{"respawned":2}`)
	r := c.MustPull("dlq", "1", "a")
	if r.Retry() != 0 {
		t.Fatalf("respawned retry %d", r.Retry())
	}
	c.Reply("dlq", r.ID(), "ack")
	ExpectJSON(t, c.Expect(http.StatusOK, http.MethodDelete, "/queues/dlq/dead", nil), `{"deleted":1}`)
	c.Expect(http.StatusNoContent, http.MethodGet, "/queues/dlq/dead/head", nil)
	c.Expect(http.StatusNotFound, http.MethodGet, "/queues/nosuch/dead", nil)

	// Default stays LMQ's: exhausted messages are dropped.
	c.PatchProps("nodlq", `{"retry":0}`)
	c.Push("nodlq", []byte("x"), "")
	c.Reply("nodlq", c.MustPull("nodlq", "1", "x").ID(), "nack")
	c.PullEmpty("nodlq", "0")
	// Nothing to wait for: a dead letter would be stored before the nack
	// is answered.
	ExpectJSON(t, c.Expect(http.StatusOK, http.MethodGet, "/queues/nodlq/dead", nil), `{"size":0}`)
}

func TestBeyondBatch(t *testing.T) {
	t.Parallel()
	_, c := StartClient(t)
	body := "--XX\r\ncontent-type: text/plain\r\n\r\none\r\n--XX\r\ncontent-type: application/json\r\n\r\n{\"n\":2}\r\n--XX--\r\n"
	r := c.Expect(http.StatusOK, http.MethodPost, "/messages/batch?batch=1", []byte(body), "Content-Type", "multipart/mixed; boundary=XX")
	ExpectJSON(t, r, `{"accum":"no","count":2}`)
	if r := c.MustPull("batch", "1", "one"); r.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("part 1 %v", r)
	}
	if r := c.MustPull("batch", "1", `{"n":2}`); r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("part 2 %v", r)
	}
	var mp bytes.Buffer
	enc := msgpack.NewEncoder(&mp)
	_ = enc.Encode([]any{
		[]any{map[string]string{"content-type": "text/plain"}, []byte("m1")},
		[]any{map[string]string{}, []byte("m2")},
	})
	ExpectJSON(t, c.Expect(http.StatusOK, http.MethodPost, "/messages/batch?batch=1", mp.Bytes(), "Content-Type", "application/x-msgpack"), `{"accum":"no","count":2}`)
	c.MustPull("batch", "1", "m1")
	c.MustPull("batch", "1", "m2")
	// A malformed batch stores nothing.
	c.Expect(http.StatusBadRequest, http.MethodPost, "/messages/batch?batch=1", []byte("--XX\r\n\r\nbroken"), "Content-Type", "multipart/mixed; boundary=XX")
	c.Expect(http.StatusBadRequest, http.MethodPost, "/messages/batch?batch=1", []byte("x"), "Content-Type", "text/plain")
	c.PullEmpty("batch", "0")
	// Without ?batch a multipart body is one LMQ message, as before.
	c.Push("batch", []byte(body), "multipart/mixed; boundary=XX")
	c.MustPull("batch", "1", body)
}

func TestBeyondIntrospection(t *testing.T) {
	t.Parallel()
	_, c := StartClient(t)
	c.Push("in/a", []byte("1"), "")
	c.Push("in/a", []byte("2"), "")
	c.Push("in b", []byte("1"), "")
	r := c.MustPull("in/a", "1", "1")
	var list struct {
		Queues []struct {
			Name string `json:"name"`
			Size int    `json:"size"`
		} `json:"queues"`
	}
	if err := json.Unmarshal(c.Expect(http.StatusOK, http.MethodGet, "/queues", nil).Body, &list); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, q := range list.Queues {
		got[q.Name] = q.Size
	}
	if got["in/a"] != 2 || got["in b"] != 1 {
		t.Fatalf("queues %+v", list)
	}
	d := c.Expect(http.StatusOK, http.MethodGet, "/queues/"+Q("in/a"), nil)
	for _, want := range []string{`"size":2`, `"in_flight":1`, `"delayed":0`, `"dead_letters":0`, `"props":{"accum":0,"retry":2,"timeout":30}`} {
		if !strings.Contains(string(d.Body), want) {
			t.Fatalf("detail %s lacks %s", d.Body, want)
		}
	}
	c.Reply("in/a", r.ID(), "ack")
	c.Expect(http.StatusNotFound, http.MethodGet, "/queues/nosuch", nil)
}

// queueCounts is what GET /queues/{name} reports.
type queueCounts struct {
	Size     int `json:"size"`
	InFlight int `json:"in_flight"`
}

// queueDetail reads GET /queues/{name}.
func queueDetail(t *testing.T, c *Client, q string) queueCounts {
	t.Helper()
	var detail queueCounts
	if err := json.Unmarshal(c.Expect(http.StatusOK, http.MethodGet, "/queues/"+Q(q), nil).Body, &detail); err != nil {
		t.Fatalf("queue detail of %q: %v", q, err)
	}
	return detail
}
