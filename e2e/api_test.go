package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHTTPAPI checks the HTTP contract (status codes, headers, JSON text,
// names, properties, hooks) against one shared gateway. Every subtest uses
// its own queues; only DefaultList touches global state and runs before the
// parallel ones.
func TestHTTPAPI(t *testing.T) {
	t.Parallel()
	gw := Start(t)

	// Sequential: the default list applies to every queue.
	t.Run("DefaultList", func(t *testing.T) { testDefaultList(t, gw, "/properties") })
	t.Run("DefaultListOldPath", func(t *testing.T) { testDefaultList(t, gw, "/props") })

	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *Gateway)
	}{
		{"PushPullAck", testPushPullAck},
		{"OldPaths", testOldPaths},
		{"ContentType", testContentType},
		{"EmptyLongPoll", testEmptyLongPoll},
		{"BadRequests", testBadRequests},
		{"NotFound", testNotFound},
		{"MethodNotAllowed", testMethodNotAllowed},
		{"UnsupportedMediaType", testUnsupportedMediaType},
		{"Properties", testProperties},
		{"InvalidProperties", testInvalidProperties},
		{"QueueCreation", testQueueCreation},
		{"DeleteQueue", testDeleteQueue},
		{"QueueNames", testQueueNames},
		{"DistinctNames", testDistinctNames},
		{"InvalidNames", testInvalidNames},
		{"PreserveHeaderHook", testPreserveHeaderHook},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, gw)
		})
	}
}

func testPushPullAck(t *testing.T, gw *Gateway) {
	c := gw.Client(t)
	const q = "api-basic"
	r := c.Expect(http.StatusOK, http.MethodPost, "/messages/"+q, []byte("hello"), "Content-Type", "text/plain")
	ExpectJSON(t, r, `{"accum":"no"}`)

	m := c.MustPull(q, "0", "hello")
	if got := m.Header.Get("Content-Type"); got != "text/plain" {
		t.Errorf("content-type %q, want text/plain", got)
	}
	if m.Retry() != 2 {
		t.Errorf("%s %q, want 2", hRetry, m.Header.Get(hRetry))
	}
	// Nothing else is available while the message is in flight.
	c.PullEmpty(q, "0")

	r = c.Expect(http.StatusNoContent, http.MethodPost, "/messages/"+q+"/"+m.ID()+"?reply=ack", nil)
	if len(r.Body) != 0 {
		t.Errorf("ack body %q, want none", r.Body)
	}
	c.ExpectReply(http.StatusNotFound, q, m.ID(), "ack")
	c.PullEmpty(q, "0")
}

func testOldPaths(t *testing.T, gw *Gateway) {
	c := gw.Client(t)
	const q = "api-old/paths"
	c.PushPath("/msgs/"+Q(q), []byte("old"), "text/plain")
	r := c.Expect(http.StatusOK, http.MethodGet, "/msgs/"+Q(q)+"?t="+msgWait, nil)
	ExpectMessage(t, r, q, "old")
	c.Expect(http.StatusNoContent, http.MethodPost, "/msgs/"+Q(q)+"/"+r.ID()+"?reply=nack", nil)
	r = c.Expect(http.StatusOK, http.MethodGet, "/msgs/"+Q(q)+"?t="+msgWait, nil)
	ExpectMessage(t, r, q, "old")
	if r.Retry() != 1 {
		t.Errorf("after nack via /msgs: retry %d, want 1", r.Retry())
	}
	c.Expect(http.StatusNoContent, http.MethodPost, "/msgs/"+Q(q)+"/"+r.ID()+"?reply=ext", nil)
	c.Expect(http.StatusNoContent, http.MethodPost, "/msgs/"+Q(q)+"/"+r.ID()+"?reply=ack", nil)
	c.Expect(http.StatusNotFound, http.MethodPost, "/msgs/"+Q(q)+"/"+r.ID()+"?reply=ack", nil)
	c.Expect(http.StatusNoContent, http.MethodGet, "/msgs/"+Q(q)+"?t=0", nil)

	r = c.Expect(http.StatusOK, http.MethodGet, "/props/"+Q(q), nil)
	ExpectJSON(t, r, `{"accum":0,"retry":2,"timeout":30}`)
	c.Expect(http.StatusNoContent, http.MethodPatch, "/props/"+Q(q), []byte(`{"timeout":5}`), "Content-Type", "application/json")
	ExpectJSON(t, c.Do(http.MethodGet, "/props/"+Q(q), nil), `{"accum":0,"retry":2,"timeout":5}`)
	if got := c.Props(q); got != `{"accum":0,"retry":2,"timeout":5}` {
		t.Errorf("/properties after PATCH /props: %s", got)
	}
	c.Expect(http.StatusNoContent, http.MethodDelete, "/props/"+Q(q), nil)
	ExpectJSON(t, c.Do(http.MethodGet, "/props/"+Q(q), nil), `{"accum":0,"retry":2,"timeout":30}`)
}

func testContentType(t *testing.T, gw *Gateway) {
	c := gw.Client(t)
	const q = "api-content-type"
	c.PatchProps(q, `{"retry":10}`) // each message is delivered four times
	for _, ct := range []string{"text/plain; charset=utf-8", "application/json", "image/png", ""} {
		c.Push(q, []byte("ct="+ct), ct)
		want := ct
		if ct == "" {
			want = "application/octet-stream"
		}
		for _, cf := range []string{"", "&cf=multipart", "&cf=msgpack"} { // cf does not apply to normal messages
			r := c.Do(http.MethodGet, "/messages/"+q+"?t="+msgWait+cf, nil)
			ExpectMessage(t, r, q, "ct="+ct)
			if got := r.Header.Get("Content-Type"); got != want {
				t.Errorf("pushed with %q, pulled (%s) with content-type %q, want %q", ct, cf, got, want)
			}
			c.ExpectReply(http.StatusNoContent, q, r.ID(), "nack")
		}
		r := c.MustPull(q, msgWait, "ct="+ct)
		c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	}
}

func testEmptyLongPoll(t *testing.T, gw *Gateway) {
	c := gw.Client(t)
	const q = "api-empty"
	r := c.Pull(q, "0")
	if r.Status != http.StatusNoContent || len(r.Body) != 0 {
		t.Fatalf("t=0 on an empty queue: got %v, want 204 without body", r)
	}
	r = c.Pull(q, "0.3")
	if r.Status != http.StatusNoContent {
		t.Fatalf("t=0.3 on an empty queue: got %v, want 204", r)
	}
	if r.Elapsed < 250*time.Millisecond {
		t.Errorf("t=0.3 answered after %v", r.Elapsed)
	}
}

func testBadRequests(t *testing.T, gw *Gateway) {
	c := gw.Client(t)
	const q = "api-bad-requests"
	for _, query := range []string{"t=abc", "t=-1", "t=", "t=NaN", "t=1s", "cf=json", "cf=", "t=0&cf=xml"} {
		if r := c.Do(http.MethodGet, "/messages/"+q+"?"+query, nil); r.Status != http.StatusBadRequest {
			t.Errorf("GET ?%s: got %v, want 400", query, r)
		}
	}
	c.Push(q, []byte("x"), "")
	m := c.MustPull(q, msgWait, "x")
	for _, reply := range []string{"", "reply=", "reply=done", "reply=ACK", "foo=ack"} {
		if r := c.Do(http.MethodPost, "/messages/"+q+"/"+m.ID()+"?"+reply, nil); r.Status != http.StatusBadRequest {
			t.Errorf("reply ?%s: got %v, want 400", reply, r)
		}
	}
	// A rejected reply does not touch the delivery.
	c.ExpectReply(http.StatusNoContent, q, m.ID(), "ack")
}

func testNotFound(t *testing.T, gw *Gateway) {
	c := gw.Client(t)
	const q = "api-not-found"
	c.Push(q, []byte("x"), "")
	for _, id := range []string{"f0eca12e-19f2-4922-bcc9-6e42bd585937", "nonsense"} {
		for _, reply := range []string{"ack", "nack", "ext"} {
			c.ExpectReply(http.StatusNotFound, q, id, reply)
		}
	}
	// An id is only valid on its own queue.
	m := c.MustPull(q, msgWait, "x")
	c.ExpectReply(http.StatusNotFound, "api-not-found-other", m.ID(), "ack")
	c.ExpectReply(http.StatusNotFound, "api-never-existed", m.ID(), "ack")
	c.ExpectReply(http.StatusNoContent, q, m.ID(), "ack")

	c.Expect(http.StatusNotFound, http.MethodDelete, "/queues/api-never-existed", nil)
	c.Expect(http.StatusNotFound, http.MethodGet, "/nope", nil)
}

func testMethodNotAllowed(t *testing.T, gw *Gateway) {
	c := gw.Client(t)
	const q = "api-methods"
	id := "f0eca12e-19f2-4922-bcc9-6e42bd585937"
	for _, tc := range []struct{ method, path string }{
		{http.MethodPut, "/messages/" + q},
		{http.MethodDelete, "/messages/" + q},
		{http.MethodPatch, "/messages/" + q},
		{http.MethodGet, "/messages/" + q + "/" + id},
		{http.MethodDelete, "/messages/" + q + "/" + id},
		{http.MethodPut, "/messages"},
		{http.MethodPut, "/queues/" + q},
		{http.MethodPatch, "/queues/" + q},
		{http.MethodPost, "/queues/" + q},
		{http.MethodPost, "/properties"},
		{http.MethodPatch, "/properties"},
		{http.MethodPost, "/properties/" + q},
		{http.MethodPut, "/properties/" + q},
		{http.MethodPut, "/msgs/" + q},
		{http.MethodGet, "/msgs/" + q + "/" + id},
		{http.MethodPost, "/props"},
		{http.MethodPut, "/props/" + q},
	} {
		if r := c.Do(tc.method, tc.path, nil); r.Status != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: got %v, want 405", tc.method, tc.path, r)
		}
	}
	// None of that created the queue.
	c.Expect(http.StatusNotFound, http.MethodDelete, "/queues/"+q, nil)
}

func testUnsupportedMediaType(t *testing.T, gw *Gateway) {
	c := gw.Client(t)
	const q = "api-media-type"
	for _, base := range []string{"/properties/", "/props/"} {
		for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded"} {
			var hdr []string
			if ct != "" {
				hdr = []string{"Content-Type", ct}
			}
			if r := c.Do(http.MethodPatch, base+q, []byte(`{"retry":5}`), hdr...); r.Status != http.StatusUnsupportedMediaType {
				t.Errorf("PATCH %s with content-type %q: got %v, want 415", base, ct, r)
			}
		}
	}
	for _, base := range []string{"/properties", "/props"} {
		if r := c.Do(http.MethodPut, base, []byte(`[]`), "Content-Type", "text/plain"); r.Status != http.StatusUnsupportedMediaType {
			t.Errorf("PUT %s text/plain: got %v, want 415", base, r)
		}
		if r := c.Do(http.MethodPut, base, []byte(`[]`)); r.Status != http.StatusUnsupportedMediaType {
			t.Errorf("PUT %s without content-type: got %v, want 415", base, r)
		}
	}
	if got := c.Props(q); got != `{"accum":0,"retry":2,"timeout":30}` {
		t.Errorf("rejected PATCH changed the properties: %s", got)
	}
	// Parameters of the JSON media type are fine.
	c.Expect(http.StatusNoContent, http.MethodPatch, "/properties/"+q, []byte(`{"retry":5}`), "Content-Type", "application/json; charset=utf-8")
	if got := c.Props(q); got != `{"accum":0,"retry":5,"timeout":30}` {
		t.Errorf("after PATCH: %s", got)
	}
}

func testProperties(t *testing.T, gw *Gateway) {
	c := gw.Client(t)
	const q = "api-props"
	steps := []struct{ patch, want string }{
		{"", `{"accum":0,"retry":2,"timeout":30}`},
		{`{"timeout":0.2}`, `{"accum":0,"retry":2,"timeout":0.2}`},
		{`{}`, `{"accum":0,"retry":2,"timeout":0.2}`},
		{`{"retry":0}`, `{"accum":0,"retry":0,"timeout":0.2}`},
		{`{"timeout":1e-05}`, `{"accum":0,"retry":0,"timeout":1e-05}`},
		{`{"timeout":30,"retry":7}`, `{"accum":0,"retry":7,"timeout":30}`},
		{`{"timeout":2.5}`, `{"accum":0,"retry":7,"timeout":2.5}`},
		{`{"timeout":0}`, `{"accum":0,"retry":7,"timeout":0}`},
		// accum is kept in whole milliseconds; pack is its old name.
		{`{"accum":0.2504}`, `{"accum":0.25,"retry":7,"timeout":0}`},
		{`{"pack":0}`, `{"accum":0,"retry":7,"timeout":0}`},
	}
	for _, s := range steps {
		if s.patch != "" {
			c.PatchProps(q, s.patch)
		}
		if got := c.Props(q); got != s.want {
			t.Errorf("after PATCH %s: GET %s, want %s", s.patch, got, s.want)
		}
	}
	c.Expect(http.StatusNoContent, http.MethodDelete, "/properties/"+q, nil)
	if got := c.Props(q); got != `{"accum":0,"retry":2,"timeout":30}` {
		t.Errorf("after DELETE: %s", got)
	}
}

func testInvalidProperties(t *testing.T, gw *Gateway) {
	c := gw.Client(t)
	const q = "api-props-invalid"
	c.PatchProps(q, `{"retry":3,"timeout":4}`)
	const want = `{"accum":0,"retry":3,"timeout":4}`
	for _, body := range []string{
		`not json`, ``, `[]`, `[1]`, `"retry"`, `null`, `{"retry":1`,
		`{"foo":1}`, `{"retry":1,"foo":1}`,
		`{"retry":1.5}`, `{"retry":"2"}`, `{"retry":true}`, `{"retry":null}`,
		`{"timeout":"x"}`, `{"timeout":[1]}`, `{"accum":true}`, `{"pack":"1"}`,
		`{"timeout":1,"accum":"x"}`,
	} {
		r := c.Do(http.MethodPatch, "/properties/"+q, []byte(body), "Content-Type", "application/json")
		if r.Status != http.StatusBadRequest {
			t.Errorf("PATCH %s: got %v, want 400", body, r)
		}
	}
	if got := c.Props(q); got != want {
		t.Errorf("rejected PATCHes changed the properties: %s, want %s", got, want)
	}
}

// testDefaultList runs sequentially: the list applies to every queue. It
// leaves the list empty.
func testDefaultList(t *testing.T, gw *Gateway, base string) {
	c := gw.Client(t)
	json := []string{"Content-Type", "application/json"}
	ExpectJSON(t, c.Expect(http.StatusOK, http.MethodGet, base, nil), `[]`)

	const list = `[["accum/.*",{"accum":30}],[".*",{"retry":0}]]`
	c.Expect(http.StatusNoContent, http.MethodPut, base, []byte(list), json...)
	ExpectJSON(t, c.Expect(http.StatusOK, http.MethodGet, base, nil), list)

	// The first matching entry wins, unanchored; the queue's own properties
	// override it.
	for _, tc := range []struct{ queue, want string }{
		{"accum/x", `{"accum":30,"retry":2,"timeout":30}`},
		{"my-accum/x", `{"accum":30,"retry":2,"timeout":30}`},
		{"dl-other", `{"accum":0,"retry":0,"timeout":30}`},
	} {
		if got := c.Props(tc.queue); got != tc.want {
			t.Errorf("%s with default list: %s, want %s", tc.queue, got, tc.want)
		}
	}
	c.PatchProps("dl-own", `{"retry":3}`)
	if got := c.Props("dl-own"); got != `{"accum":0,"retry":3,"timeout":30}` {
		t.Errorf("own props over default list: %s", got)
	}
	// The default retry applies to messages pushed now.
	c.Push("dl-other", []byte("r0"), "")
	m := c.MustPull("dl-other", msgWait, "r0")
	if m.Retry() != 0 {
		t.Errorf("retry-remaining %d under default retry 0, want 0", m.Retry())
	}
	c.ExpectReply(http.StatusNoContent, "dl-other", m.ID(), "nack")
	c.PullEmpty("dl-other", "0")

	for _, bad := range []string{
		`[["(",{"retry":1}]]`, `[["a",{"foo":1}]]`, `[["a",{"retry":"x"}]]`, `{"a":1}`,
		`[["a"]]`, `[[1,{"retry":1}]]`, `[["a",{"retry":1},3]]`, `not json`,
	} {
		if r := c.Do(http.MethodPut, base, []byte(bad), json...); r.Status != http.StatusBadRequest {
			t.Errorf("PUT %s %s: got %v, want 400", base, bad, r)
		}
	}
	ExpectJSON(t, c.Do(http.MethodGet, base, nil), list)

	// Stored as given: only the keys given (sorted), entries in their order.
	const list2 = `[["^z",{"timeout":0.5,"accum":1}],["^y",{}]]`
	c.Expect(http.StatusNoContent, http.MethodPut, base, []byte(list2), json...)
	ExpectJSON(t, c.Do(http.MethodGet, base, nil), `[["^z",{"accum":1,"timeout":0.5}],["^y",{}]]`)

	c.Expect(http.StatusNoContent, http.MethodDelete, base, nil)
	ExpectJSON(t, c.Do(http.MethodGet, base, nil), `[]`)
	if got := c.Props("dl-other"); got != `{"accum":0,"retry":2,"timeout":30}` {
		t.Errorf("after DELETE %s: %s", base, got)
	}
	c.Expect(http.StatusNoContent, http.MethodDelete, "/properties/dl-own", nil)
}

func testQueueCreation(t *testing.T, gw *Gateway) {
	c := gw.Client(t)
	// GET /properties/:name does not create the queue.
	c.Props("api-create-props")
	c.Expect(http.StatusNotFound, http.MethodDelete, "/queues/api-create-props", nil)
	// GET /messages/:name?t=0 does, so does PATCH /properties/:name.
	c.PullEmpty("api-create-pull", "0")
	c.Expect(http.StatusNoContent, http.MethodDelete, "/queues/api-create-pull", nil)
	c.PatchProps("api-create-patch", `{"retry":1}`)
	c.Expect(http.StatusNoContent, http.MethodDelete, "/queues/api-create-patch", nil)
	c.Expect(http.StatusNotFound, http.MethodDelete, "/queues/api-create-patch", nil)
}

func testDeleteQueue(t *testing.T, gw *Gateway) {
	c := gw.Client(t)
	const q = "api-delete"
	for _, b := range []string{"1", "2", "3"} {
		c.Push(q, []byte(b), "")
	}
	inflight := c.MustPull(q, msgWait, "1")
	c.Expect(http.StatusNoContent, http.MethodDelete, "/queues/"+q, nil)
	c.Expect(http.StatusNotFound, http.MethodDelete, "/queues/"+q, nil)
	c.ExpectReply(http.StatusNotFound, q, inflight.ID(), "ack")
	// Pulling creates the queue afresh, empty.
	c.PullEmpty(q, "0.2")
	c.Push(q, []byte("4"), "")
	c.MustPull(q, msgWait, "4")
}

// names that must work on every endpoint, each with its path encoding.
var queueNames = []struct{ name, enc string }{
	{"lmq/foo", "lmq%2Ffoo"},
	{"lmq/foo/bar", "lmq%2Ffoo%2Fbar"},
	{"host:port", "host:port"},
	{"a.b.c", "a.b.c"},
	{"with space", "with%20space"},
	{"日本語/キュー", "%E6%97%A5%E6%9C%AC%E8%AA%9E%2F%E3%82%AD%E3%83%A5%E3%83%BC"},
	{"a+b", "a+b"},
	{"c+d", "c%2Bd"},
	{"100%", "100%25"},
	{"a/../b", "a%2F..%2Fb"},
	{"*>", "%2A%3E"},
	{"Mixed.Case", "Mixed.Case"},
	{strings.Repeat("n", 255), strings.Repeat("n", 255)},
	{strings.Repeat("語", 85), strings.Repeat("%E8%AA%9E", 85)},
	// Beyond LMQ's 255 (its names were Erlang atoms): up to 1,024 bytes.
	{strings.Repeat("m", 1024), strings.Repeat("m", 1024)},
	{strings.Repeat("語", 341), strings.Repeat("%E8%AA%9E", 341)},
}

// testQueueNames walks every endpoint with each name (new and old paths).
func testQueueNames(t *testing.T, gw *Gateway) {
	c := gw.Client(t)
	json := []string{"Content-Type", "application/json"}
	for i, n := range queueNames {
		msgs, props := "/messages/", "/properties/"
		if i%2 == 1 {
			msgs, props = "/msgs/", "/props/"
		}
		p := n.enc
		c.PushPath(msgs+p, []byte(n.name), "text/plain")
		r := c.Expect(http.StatusOK, http.MethodGet, msgs+p+"?t="+msgWait, nil)
		ExpectMessage(t, r, n.name, n.name)
		c.Expect(http.StatusNoContent, http.MethodPost, msgs+p+"/"+r.ID()+"?reply=ext", nil)
		c.Expect(http.StatusNoContent, http.MethodPost, msgs+p+"/"+r.ID()+"?reply=ack", nil)
		c.Expect(http.StatusNoContent, http.MethodPatch, props+p, []byte(`{"retry":4}`), json...)
		ExpectJSON(t, c.Expect(http.StatusOK, http.MethodGet, props+p, nil), `{"accum":0,"retry":4,"timeout":30}`)
		c.Expect(http.StatusNoContent, http.MethodDelete, props+p, nil)
		ExpectJSON(t, c.Expect(http.StatusOK, http.MethodGet, props+p, nil), `{"accum":0,"retry":2,"timeout":30}`)
		c.Expect(http.StatusNoContent, http.MethodDelete, "/queues/"+p, nil)
		c.Expect(http.StatusNotFound, http.MethodDelete, "/queues/"+p, nil)
	}
}

// testDistinctNames: different spellings of one name reach one queue, and
// names that some layer could confuse stay apart.
func testDistinctNames(t *testing.T, gw *Gateway) {
	c := gw.Client(t)
	// '+' is literal whether sent raw or as %2B; it is not a space.
	c.PushPath("/messages/dn+x", []byte("plus"), "")
	c.PullEmpty("dn x", "0")
	r := c.Expect(http.StatusOK, http.MethodGet, "/messages/dn%2Bx?t="+msgWait, nil)
	ExpectMessage(t, r, "dn+x", "plus")
	c.Expect(http.StatusNoContent, http.MethodPost, "/messages/dn+x/"+r.ID()+"?reply=ack", nil)

	// Encoded and literal spellings of unreserved characters are the same name.
	c.PushPath("/messages/dn%3Ay%2Ez", []byte("colon"), "")
	c.MustPull("dn:y.z", msgWait, "colon")

	// A slash in a name is not a path separator, and case matters.
	for _, q := range []string{"dn/a", "dn%2Fa", "DN/A", "dn/a/", "dn//a"} {
		c.Push(q, []byte(q), "")
	}
	for _, q := range []string{"dn/a", "dn%2Fa", "DN/A", "dn/a/", "dn//a"} {
		c.MustPull(q, msgWait, q)
		c.PullEmpty(q, "0")
	}
}

func testInvalidNames(t *testing.T, gw *Gateway) {
	c := gw.Client(t)
	id := "f0eca12e-19f2-4922-bcc9-6e42bd585937"
	json := []string{"Content-Type", "application/json"}
	for _, enc := range []string{
		"%00", "a%01b", "a%0Ab", "a%0Db", "tab%09", "del%7F", "c1%C2%85",
		strings.Repeat("n", 1025),
		strings.Repeat("%E8%AA%9E", 342), // 1,026 bytes
	} {
		for _, tc := range []struct {
			method, path string
			body         []byte
			hdr          []string
		}{
			{http.MethodPost, "/messages/" + enc, []byte("x"), nil},
			{http.MethodGet, "/messages/" + enc + "?t=0", nil, nil},
			{http.MethodPost, "/messages/" + enc + "/" + id + "?reply=ack", nil, nil},
			{http.MethodDelete, "/queues/" + enc, nil, nil},
			{http.MethodGet, "/properties/" + enc, nil, nil},
			{http.MethodPatch, "/properties/" + enc, []byte(`{"retry":1}`), json},
			{http.MethodDelete, "/properties/" + enc, nil, nil},
			{http.MethodPost, "/msgs/" + enc, []byte("x"), nil},
			{http.MethodGet, "/msgs/" + enc + "?t=0", nil, nil},
			{http.MethodGet, "/props/" + enc, nil, nil},
		} {
			name := enc
			if len(name) > 40 {
				name = name[:40] + "…"
			}
			if r := c.Do(tc.method, tc.path, tc.body, tc.hdr...); r.Status != http.StatusBadRequest {
				t.Errorf("%s with name %s: got %v, want 400", tc.method, name, r)
			}
		}
	}
}

func testPreserveHeaderHook(t *testing.T, gw *Gateway) {
	c := gw.Client(t)
	const q = "api-hooks"
	const hooks = `{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["user-agent"]]]}}`
	c.PatchProps(q, hooks)
	const want = `{"accum":0,"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["user-agent"]]]},"retry":2,"timeout":30}`
	if got := c.Props(q); got != want {
		t.Errorf("props with hooks: %s, want %s", got, want)
	}
	c.Push(q, []byte("ua"), "text/plain", "User-Agent", "lmq-e2e/1.0", "X-Other", "dropped")
	r := c.MustPull(q, msgWait, "ua")
	if got := r.Header.Get("User-Agent"); got != "lmq-e2e/1.0" {
		t.Errorf("pulled user-agent %q, want lmq-e2e/1.0", got)
	}
	if got := r.Header.Get("X-Other"); got != "" {
		t.Errorf("header not named by the hook came back: x-other %q", got)
	}
	if got := r.Header.Get("Content-Type"); got != "text/plain" {
		t.Errorf("content-type %q", got)
	}
	c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")

	// A queue without the hook keeps no headers.
	c.Push("api-hooks-none", []byte("plain"), "", "User-Agent", "lmq-e2e/1.0")
	if got := c.MustPull("api-hooks-none", msgWait, "plain").Header.Get("User-Agent"); got != "" {
		t.Errorf("queue without hook returned user-agent %q", got)
	}

	// Unknown or malformed hooks are rejected and change nothing.
	for _, bad := range []string{
		`{"hooks":{"pre_http_push":[["no_such_hook",["user-agent"]]]}}`,
		`{"hooks":{"no_such_point":[["lmq_hook_preserve_header",["user-agent"]]]}}`,
		`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header","user-agent"]]}}`,
		`{"hooks":"x"}`,
	} {
		if r := c.Do(http.MethodPatch, "/properties/"+q, []byte(bad), "Content-Type", "application/json"); r.Status != http.StatusBadRequest {
			t.Errorf("PATCH %s: got %v, want 400", bad, r)
		}
	}
	if got := c.Props(q); got != want {
		t.Errorf("after rejected PATCHes: %s, want %s", got, want)
	}
}
