package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// requestTimeout bounds a request that is not a deliberate long-poll.
const requestTimeout = 30 * time.Second

// msgWait is the t of a pull that expects a message to be available: it
// costs nothing when the message is there, and is generous so that a loaded
// machine (go test runs packages in parallel) does not fail the test.
const msgWait = "20"

// LMQ's message response headers.
const (
	hQueue = "x-lmq-queue-name"
	hID    = "x-lmq-message-id"
	hType  = "x-lmq-message-type"
	hRetry = "x-lmq-retry-remaining"
)

// Q percent-encodes a queue name as one path segment, the way LMQ clients do:
// "lmq/foo" becomes "lmq%2Ffoo"; ':' and '+' stay literal.
func Q(name string) string { return url.PathEscape(name) }

// Response is a fully read HTTP response.
type Response struct {
	Status  int
	Header  http.Header
	Body    []byte
	Elapsed time.Duration // from sending the request to the end of the body
}

// ID is the delivery id of a message response.
func (r *Response) ID() string { return r.Header.Get(hID) }

// Retry is x-lmq-retry-remaining as a number (-1 when absent or malformed).
func (r *Response) Retry() int {
	n, err := strconv.Atoi(r.Header.Get(hRetry))
	if err != nil {
		return -1
	}
	return n
}

func (r *Response) String() string {
	body := r.Body
	if len(body) > 200 {
		body = append(body[:200:200], "…"...)
	}
	return fmt.Sprintf("%d %q %v", r.Status, body, r.Header)
}

// Client issues HTTP requests to one gateway on behalf of one test. Its
// methods fail the test on transport errors and must be called from the
// test's goroutine; other goroutines use Send.
type Client struct {
	t    testing.TB
	base string
	gw   *Gateway // when set, its current address wins over base (url)
	hc   *http.Client
}

// url is the base URL the client sends to now: its gateway's, which a
// restart may move (Gateway.start).
func (c *Client) url() string {
	if c.gw != nil {
		if b := c.gw.base.Load(); b != nil {
			return *b
		}
	}
	return c.base
}

// Send performs one request and reads the whole response. path is already
// escaped (use Q for names) and may carry a query. hdr is a list of header
// name, value pairs. It does not touch the test, so it may run anywhere.
func (c *Client) Send(ctx context.Context, method, path string, body []byte, hdr ...string) (*Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url()+path, rd)
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading body: %w", method, path, err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b, Elapsed: time.Since(start)}, nil
}

// Do is Send bounded by requestTimeout, failing the test on transport errors.
func (c *Client) Do(method, path string, body []byte, hdr ...string) *Response {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	r, err := c.Send(ctx, method, path, body, hdr...)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// Expect does a request and fails the test unless it is answered status.
func (c *Client) Expect(status int, method, path string, body []byte, hdr ...string) *Response {
	c.t.Helper()
	r := c.Do(method, path, body, hdr...)
	if r.Status != status {
		c.t.Fatalf("%s %s: got %v, want status %d", method, path, r, status)
	}
	return r
}

// Push posts body to the queue, with the content-type when ct is not "",
// and checks LMQ's answer for a non-accumulating queue.
func (c *Client) Push(name string, body []byte, ct string, hdr ...string) {
	c.t.Helper()
	c.PushPath("/messages/"+Q(name), body, ct, hdr...)
}

// TryPush is Push for many goroutines at once: it posts body to the queue
// within ctx and returns an error, instead of failing the test, unless
// the answer is 200.
func (c *Client) TryPush(ctx context.Context, name string, body []byte, hdr ...string) error {
	r, err := c.Send(ctx, http.MethodPost, "/messages/"+Q(name), body, hdr...)
	if err != nil {
		return fmt.Errorf("push to %q: %w", name, err)
	}
	if r.Status != http.StatusOK {
		return fmt.Errorf("push to %q: %v", name, r)
	}
	return nil
}

// PushPath is Push to an explicit (escaped) path, e.g. under /msgs.
func (c *Client) PushPath(path string, body []byte, ct string, hdr ...string) {
	c.t.Helper()
	if ct != "" {
		hdr = append(hdr, "Content-Type", ct)
	}
	r := c.Expect(http.StatusOK, http.MethodPost, path, body, hdr...)
	ExpectJSON(c.t, r, `{"accum":"no"}`)
}

// Pull does GET /messages/<name>?t=<wait>; wait "" omits t (wait forever,
// bounded here by requestTimeout).
func (c *Client) Pull(name, wait string) *Response {
	c.t.Helper()
	path := "/messages/" + Q(name)
	if wait != "" {
		path += "?t=" + wait
	}
	return c.Do(http.MethodGet, path, nil)
}

// MustPull pulls and fails unless a normal message of the queue with the
// given body came back; it returns the response for further checks.
func (c *Client) MustPull(name, wait string, body string) *Response {
	c.t.Helper()
	r := c.Pull(name, wait)
	ExpectMessage(c.t, r, name, body)
	return r
}

// PullEmpty pulls and fails unless the answer is 204.
func (c *Client) PullEmpty(name, wait string) {
	c.t.Helper()
	if r := c.Pull(name, wait); r.Status != http.StatusNoContent {
		c.t.Fatalf("pull %q t=%s: got %v, want 204", name, wait, r)
	}
}

// Reply posts ack, nack or ext for a delivery and returns the status.
func (c *Client) Reply(name, id, reply string) int {
	c.t.Helper()
	return c.Do(http.MethodPost, "/messages/"+Q(name)+"/"+url.PathEscape(id)+"?reply="+reply, nil).Status
}

// ExpectReply fails unless the reply is answered status.
func (c *Client) ExpectReply(status int, name, id, reply string) {
	c.t.Helper()
	if got := c.Reply(name, id, reply); got != status {
		c.t.Fatalf("%s of %s on %q: got %d, want %d", reply, id, name, got, status)
	}
}

// PatchProps sends a PATCH /properties/<name> with a JSON body; want 204.
func (c *Client) PatchProps(name, js string) {
	c.t.Helper()
	c.Expect(http.StatusNoContent, http.MethodPatch, "/properties/"+Q(name), []byte(js), "Content-Type", "application/json")
}

// Props returns the effective properties of a queue as JSON text.
func (c *Client) Props(name string) string {
	c.t.Helper()
	r := c.Expect(http.StatusOK, http.MethodGet, "/properties/"+Q(name), nil)
	expectJSONType(c.t, r)
	return string(r.Body)
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// ExpectMessage checks a message response: 200, the body, LMQ's headers
// (queue name, a UUID delivery id, type normal, a retry count).
func ExpectMessage(t testing.TB, r *Response, queue, body string) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("pull %q: got %v, want 200 with %q", queue, r, body)
	}
	if string(r.Body) != body {
		t.Fatalf("pull %q: body %q, want %q", queue, r.Body, body)
	}
	if got := r.Header.Get(hQueue); got != queue {
		t.Errorf("pull %q: %s %q", queue, hQueue, got)
	}
	if id := r.ID(); !uuidRE.MatchString(id) {
		t.Errorf("pull %q: %s %q is not a UUID", queue, hID, id)
	}
	if got := r.Header.Get(hType); got != "normal" {
		t.Errorf("pull %q: %s %q, want normal", queue, hType, got)
	}
	if r.Retry() < 0 {
		t.Errorf("pull %q: %s %q", queue, hRetry, r.Header.Get(hRetry))
	}
}

// ExpectJSON fails unless r is a JSON response with exactly the text want.
func ExpectJSON(t testing.TB, r *Response, want string) {
	t.Helper()
	expectJSONType(t, r)
	if string(r.Body) != want {
		t.Errorf("body %s, want %s", r.Body, want)
	}
}

func expectJSONType(t testing.TB, r *Response) {
	t.Helper()
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		t.Errorf("content-type %q, want application/json", r.Header.Get("Content-Type"))
	}
}
