package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/fakecore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/internal/route"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// These tests run the HTTP front end over real HTTP (httptest) with a fake
// core, and check what a client sees: status codes, headers and the exact
// JSON text of LMQ's API (see /work/shared/spec/lmq-api.md) and of the
// endpoints beyond it. The e2e suite runs the same journeys against the
// binary on JetStream.

type apiServer struct {
	t    *testing.T
	core *fakecore.Core
	srv  *httptest.Server
}

var (
	_ Messages = (*fakecore.Messages)(nil)
	_ Queues   = (*fakecore.Queues)(nil)
	_ Inspect  = (*fakecore.Inspect)(nil)
)

// coreOf is the Core of fake core f's handles.
func coreOf(f *fakecore.Core) Core {
	return Core{Messages: f.Messages(), Queues: f.Queues(), Inspect: f.Inspect()}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func startAPI(t *testing.T, opts Options) *apiServer {
	t.Helper()
	core := fakecore.New()
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	srv := httptest.NewUnstartedServer(New(coreOf(core), opts))
	srv.Config.ConnContext = ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	return &apiServer{t: t, core: core, srv: srv}
}

type answer struct {
	status int
	header http.Header
	body   string
}

// do sends a request; hdr holds name, value pairs ("Content-Type" among them).
func (s *apiServer) do(method, path, body string, hdr ...string) answer {
	s.t.Helper()
	return s.doCtx(context.Background(), method, path, body, hdr...)
}

func (s *apiServer) doCtx(ctx context.Context, method, path, body string, hdr ...string) answer {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.srv.URL+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("%s %s: reading answer: %v", method, path, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// want checks the status and, unless body is "*", the exact body; a JSON
// answer must say so in its content-type.
func (a answer) want(t *testing.T, what string, status int, body string) {
	t.Helper()
	if a.status != status || (body != "*" && a.body != body) {
		t.Errorf("%s: %d %q, want %d %q", what, a.status, a.body, status, body)
		return
	}
	if strings.HasPrefix(body, "{") || strings.HasPrefix(body, "[") {
		if ct := a.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: content-type %q, want application/json", what, ct)
		}
	}
	if status == http.StatusNoContent && a.body != "" {
		t.Errorf("%s: 204 with a body %q", what, a.body)
	}
}

// wantError checks an error answer: status and {"error": text containing sub}.
func (a answer) wantError(t *testing.T, what string, status int, sub string) {
	t.Helper()
	if a.status != status || !strings.HasPrefix(a.body, `{"error":"`) || !strings.Contains(a.body, sub) ||
		a.header.Get("Content-Type") != "application/json" {
		t.Errorf("%s: %d %s %q, want %d {\"error\":...%s...}", what, a.status, a.header.Get("Content-Type"), a.body, status, sub)
	}
}

const textPlain = "text/plain"

func TestPushPullReply(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	for _, base := range []string{"/messages", "/msgs"} {
		q := "q" + strings.TrimPrefix(base, "/")
		s.do("POST", base+"/"+q, "hello", "Content-Type", textPlain).want(t, "push", 200, `{"accum":"no"}`)
		s.do("POST", base+"/"+q, "bare").want(t, "push without content-type", 200, `{"accum":"no"}`)

		a := s.do("GET", base+"/"+q+"?t=0", "")
		a.want(t, "pull", 200, "hello")
		id := a.header.Get("X-Lmq-Message-Id")
		for k, v := range map[string]string{
			"Content-Type":          textPlain,
			"X-Lmq-Queue-Name":      q,
			"X-Lmq-Message-Type":    "normal",
			"X-Lmq-Retry-Remaining": "2",
			"Content-Length":        "5",
			// Not a page of the gateway's origin in a browser.
			"X-Content-Type-Options":  "nosniff",
			"Content-Security-Policy": "sandbox",
		} {
			if got := a.header.Get(k); got != v {
				t.Errorf("%s pull: %s %q, want %q", base, k, got, v)
			}
		}
		if id == "" {
			t.Fatalf("%s pull: no message id", base)
		}
		s.do("POST", base+"/"+q+"/"+id+"?reply=ext", "").want(t, "ext", 204, "")
		s.do("POST", base+"/"+q+"/"+id+"?reply=ack", "").want(t, "ack", 204, "")
		s.do("POST", base+"/"+q+"/"+id+"?reply=ack", "").wantError(t, "second ack", 404, "not found")
		s.do("POST", base+"/other/"+id+"?reply=ack", "").wantError(t, "ack on another queue", 404, "not found")

		a = s.do("GET", base+"/"+q+"?t=0.01", "")
		a.want(t, "pull of a message pushed without content-type", 200, "bare")
		if ct := a.header.Get("Content-Type"); ct != mapping.DefaultContentType {
			t.Errorf("content-type %q, want %q", ct, mapping.DefaultContentType)
		}
		id = a.header.Get("X-Lmq-Message-Id")
		s.do("POST", base+"/"+q+"/"+id+"?reply=nack", "").want(t, "nack", 204, "")
		s.do("POST", base+"/"+q+"/"+id+"?reply=bogus", "").wantError(t, "unknown reply", 400, "")
		s.do("POST", base+"/"+q+"/"+id, "").wantError(t, "no reply", 400, "")
		s.do("GET", base+"/"+q+"?t=0", "").want(t, "pull of the nacked", 200, "bare")
		s.do("GET", base+"/"+q+"?t=0", "").want(t, "pull of nothing", 204, "")
	}
}

// TestRawHeaders reads an answer off the wire: LMQ's headers are spelled in
// lowercase, as LMQ wrote them.
func TestRawHeaders(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	s.do("POST", "/messages/raw", "x", "Content-Type", textPlain).want(t, "push", 200, `{"accum":"no"}`)
	c, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /messages/raw?t=0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	raw, err := io.ReadAll(bufio.NewReader(c))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"HTTP/1.1 200 OK\r\n", "\r\nx-lmq-queue-name: raw\r\n", "\r\nx-lmq-message-type: normal\r\n",
		"\r\nx-lmq-retry-remaining: 2\r\n", "\r\nx-lmq-message-id: ", "\r\nContent-Type: text/plain\r\n"} {
		if !strings.Contains(string(raw), line) {
			t.Errorf("answer lacks %q:\n%s", line, raw)
		}
	}
}

func TestQueueNamesInPaths(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	for path, queue := range map[string]string{
		"lmq%2Ffoo":           "lmq/foo",
		"a+b":                 "a+b",
		"sp%20ace":            "sp ace",
		"x.y:z":               "x.y:z",
		"%E3%81%82":           "あ",
		"double%2F%2Fslash":   "double//slash",
		"dots%2F..%2Fup":      "dots/../up",
		"%252F-stays-encoded": "%2F-stays-encoded",
	} {
		s.do("POST", "/messages/"+path, queue).want(t, "push to "+path, 200, `{"accum":"no"}`)
		a := s.do("GET", "/messages/"+path+"?t=0", "")
		a.want(t, "pull from "+path, 200, queue)
		if got := a.header.Get("X-Lmq-Queue-Name"); got != queue {
			t.Errorf("%s: queue name %q, want %q", path, got, queue)
		}
	}
}

func TestAccumulation(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	s.do("POST", "/messages/pkg", "one", "Content-Type", textPlain).want(t, "first push", 200, `{"accum":"new"}`)
	s.do("POST", "/messages/pkg", "two").want(t, "second push", 200, `{"accum":"yes"}`)
	s.do("POST", "/messages/pkgm", "1", "Content-Type", textPlain).want(t, "first push", 200, `{"accum":"new"}`)
	s.do("POST", "/messages/pkgm", "2").want(t, "second push", 200, `{"accum":"yes"}`)

	// cf=multipart (the default): LMQ's exact layout, boundary = message id.
	a := s.do("GET", "/messages/pkg?t=0", "")
	id := a.header.Get("X-Lmq-Message-Id")
	want := "\r\n--" + id + "\r\ncontent-type: text/plain\r\ncontent-transfer-encoding: binary\r\n\r\none" +
		"\r\n--" + id + "\r\ncontent-type: application/octet-stream\r\ncontent-transfer-encoding: binary\r\n\r\ntwo" +
		"\r\n--" + id + "--\r\n"
	a.want(t, "compound, multipart", 200, want)
	if ct := a.header.Get("Content-Type"); ct != "multipart/mixed; boundary="+id {
		t.Errorf("compound content-type %q", ct)
	}
	if mt := a.header.Get("X-Lmq-Message-Type"); mt != "compound" {
		t.Errorf("compound message type %q", mt)
	}

	// cf=msgpack: [[{header: value}, bytes], ...].
	a = s.do("GET", "/messages/pkgm?t=0&cf=msgpack", "")
	if a.status != 200 || a.header.Get("Content-Type") != mapping.ContentTypeMsgpack || a.header.Get("X-Lmq-Message-Type") != "compound" {
		t.Fatalf("compound, msgpack: %d %v", a.status, a.header)
	}
	var parts []any
	if err := msgpack.Unmarshal([]byte(a.body), &parts); err != nil {
		t.Fatal(err)
	}
	wantParts := []any{
		[]any{map[string]any{"content-type": textPlain}, []byte("1")},
		[]any{map[string]any{"content-type": mapping.DefaultContentType}, []byte("2")},
	}
	if !reflect.DeepEqual(parts, wantParts) {
		t.Errorf("compound, msgpack: %#v, want %#v", parts, wantParts)
	}
	// cf is ignored for a normal message, refused when unknown.
	s.do("POST", "/messages/n", "plain").want(t, "push", 200, `{"accum":"no"}`)
	s.do("GET", "/messages/n?t=0&cf=msgpack", "").want(t, "normal with cf=msgpack", 200, "plain")
	s.do("GET", "/messages/n?t=0&cf=json", "").wantError(t, "cf=json", 400, "cf")
}

// TestKeptHeaders: a queue's pre_http_push hooks name request headers kept
// with the message and handed out with it, in a part of a compound too.
func TestKeptHeaders(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	hooks := `{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["X-Trace"]]]}}`
	for _, q := range []string{"kept", "pkgkept"} {
		s.do("PATCH", "/properties/"+q, hooks, "Content-Type", "application/json").want(t, "patch", 204, "")
		s.do("POST", "/messages/"+q, "m", "X-Trace", "abc", "X-Other", "dropped").want(t, "push", 200, "*")
	}
	a := s.do("GET", "/messages/kept?t=0", "")
	if a.header.Get("X-Trace") != "abc" || a.header.Get("X-Other") != "" {
		t.Errorf("kept headers: %v", a.header)
	}
	a = s.do("GET", "/messages/pkgkept?t=0", "")
	if !strings.Contains(a.body, "content-type: application/octet-stream\r\nx-trace: abc\r\ncontent-transfer-encoding: binary\r\n") {
		t.Errorf("compound part lacks the kept header: %q", a.body)
	}
}

func TestPushOptions(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	s.do("POST", "/messages/o?delay=1.5&ttl=60", "x", "Idempotency-Key", "k1").want(t, "push", 200, `{"accum":"no"}`)
	got := s.core.LastOptions()
	if want := (gateway.PushOptions{Delay: 1500 * time.Millisecond, TTL: time.Minute, IdempotencyKey: "k1"}); got != want {
		t.Errorf("push options %+v, want %+v", got, want)
	}
	for _, q := range []string{"delay=x", "delay=-1", "ttl=1e300", "delay=3600;x=1"} {
		s.do("POST", "/messages/o?"+q, "x").wantError(t, q, 400, "")
	}
}

func TestPushAllPullAny(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	s.do("POST", "/messages?qre=^all", "x").want(t, "push-all, no queue", 200, `{}`)
	s.do("GET", "/messages?qre=^all&t=0", "").want(t, "pull-any, no queue", 204, "")
	for _, q := range []string{"all-1", "all-2", "pkgall"} {
		s.do("PATCH", "/properties/"+q, `{}`, "Content-Type", "application/json").want(t, "create", 204, "")
	}
	s.do("POST", "/messages?qre=all", "x", "Content-Type", textPlain).want(t, "push-all", 200,
		`{"all-1":{"accum":"no"},"all-2":{"accum":"no"},"pkgall":{"accum":"new"}}`)
	a := s.do("GET", "/msgs?qre=^all-2$&t=0", "")
	a.want(t, "pull-any", 200, "x")
	if q := a.header.Get("X-Lmq-Queue-Name"); q != "all-2" {
		t.Errorf("pull-any: queue %q", q)
	}
	for _, path := range []string{"/messages", "/messages?qre=(", "/messages?t=0"} {
		s.do("POST", path, "x").wantError(t, "push-all "+path, 400, "qre")
		s.do("GET", path, "").wantError(t, "pull-any "+path, 400, "qre")
	}
}

// TestLongPoll: a pull without t waits for a push; with t it answers 204
// once t passed; a client leaving hands its message back (Abandon).
func TestLongPoll(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	got := make(chan answer, 1)
	go func() { got <- s.do("GET", "/messages/lp", "") }()
	<-s.core.Waiting()
	s.do("POST", "/messages/lp", "late").want(t, "push", 200, `{"accum":"no"}`)
	(<-got).want(t, "waiting pull", 200, "late")

	start := time.Now()
	s.do("GET", "/messages/lp?t=0.05", "").want(t, "pull with t", 204, "")
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("pull with t=0.05 answered after %v", d)
	}

	// A client that leaves while its pull is being answered: the message
	// reaches the core's hands as the request's context ends (deliverOnCancel)
	// and is given back, not written to nobody.
	s.core.DeliverOnCancel()
	for len(s.core.Waiting()) > 0 {
		<-s.core.Waiting() // signals of the pulls above
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.srv.URL+"/messages/gone", nil)
		resp, err := s.srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-s.core.Waiting()
	s.core.Put("gone", gateway.Message{Body: []byte("m")}) // no wake-up
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled client got an answer")
	}
	testwait.For(t, "the delivery of a client that left given back", func() bool { return len(s.core.Abandoned()) > 0 })
	s.do("GET", "/messages/gone?t=0", "").want(t, "the message given back", 200, "m")
}

func TestProperties(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	const js = "application/json"
	for _, base := range []string{"/properties", "/props"} {
		s.do("GET", base, "").want(t, "defaults, none", 200, `[]`)
		list := `[["accum/.*",{"accum":30}],[".*",{"retry":0}]]`
		s.do("PUT", base, list, "Content-Type", "application/json; charset=utf-8").want(t, "put defaults", 204, "")
		s.do("GET", base, "").want(t, "defaults", 200, list)
		s.do("PUT", base, list, "Content-Type", textPlain).wantError(t, "put as text", 415, "application/json")
		s.do("PUT", base, list).wantError(t, "put without content-type", 415, "application/json")
		s.do("PUT", base, `[["(",{}]]`, "Content-Type", js).wantError(t, "invalid regexp", 400, "")
		s.do("PUT", base, `{}`, "Content-Type", js).wantError(t, "not a list", 400, "")
		// The first matching entry alone applies.
		s.do("GET", base+"/accum%2Fx", "").want(t, "props by default", 200, `{"accum":30,"retry":2,"timeout":30}`)
		s.do("GET", base+"/other", "").want(t, "props by default", 200, `{"accum":0,"retry":0,"timeout":30}`)
		s.do("DELETE", base, "").want(t, "delete defaults", 204, "")
		s.do("GET", base, "").want(t, "defaults, cleared", 200, `[]`)

		q := base + "/p"
		s.do("GET", q, "").want(t, "props", 200, `{"accum":0,"retry":2,"timeout":30}`)
		s.do("PATCH", q, `{"retry":5,"timeout":0.2}`, "Content-Type", js).want(t, "patch", 204, "")
		s.do("GET", q, "").want(t, "patched", 200, `{"accum":0,"retry":5,"timeout":0.2}`)
		s.do("PATCH", q, `{}`, "Content-Type", js).want(t, "empty patch", 204, "")
		s.do("GET", q, "").want(t, "after an empty patch", 200, `{"accum":0,"retry":5,"timeout":0.2}`)
		for _, bad := range []string{`{"retry":1.5}`, `{"nope":1}`, `[]`, `{`, `{"timeout":"x"}`} {
			s.do("PATCH", q, bad, "Content-Type", js).wantError(t, "patch "+bad, 400, "")
		}
		s.do("PATCH", q, `{"retry":1}`, "Content-Type", textPlain).wantError(t, "patch as text", 415, "")
		s.do("GET", q, "").want(t, "after refused patches", 200, `{"accum":0,"retry":5,"timeout":0.2}`)
		s.do("DELETE", q, "").want(t, "reset", 204, "")
		s.do("GET", q, "").want(t, "reset", 200, `{"accum":0,"retry":2,"timeout":30}`)
	}
}

func TestDeleteQueue(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	s.do("POST", "/messages/del", "x").want(t, "push", 200, "*")
	s.do("DELETE", "/queues/del", "").want(t, "delete", 204, "")
	s.do("DELETE", "/queues/del", "").wantError(t, "delete again", 404, "not found")
}

func TestUnroutable(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	for _, c := range []struct{ method, path string }{
		{"PUT", "/messages/q"}, {"DELETE", "/messages"}, {"GET", "/messages/q/id"},
		{"POST", "/queues/q"}, {"POST", "/properties"}, {"PUT", "/props/q"},
	} {
		s.do(c.method, c.path, "").want(t, c.method+" "+c.path, 405, `{"error":"method not allowed"}`)
	}
	for _, path := range []string{"/", "/nope", "/messages/q/id/more", "/queues/q/dead/other"} {
		s.do("GET", path, "").want(t, "GET "+path, 404, `{"error":"not found"}`)
	}
}

func TestMalformedQueries(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	for _, q := range []string{"t=%zz", "t=0;x=1", "t=abc", "t=-1", "t=1e300", "%"} {
		s.do("GET", "/messages/mq?"+q, "").wantError(t, "pull ?"+q, 400, "")
	}
	s.do("GET", "/properties?%", "").wantError(t, "malformed query on another route", 400, "malformed query")
	s.do("GET", "/messages/mq?t=0&unknown=1", "").want(t, "unknown parameter", 204, "")
}

func TestBodyLimits(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{MaxBodyBytes: 10, MaxBufferedBody: 8})
	s.do("POST", "/messages/big", "0123456789").want(t, "at the limit", 200, `{"accum":"no"}`)
	s.do("POST", "/messages/big", "0123456789x").want(t, "beyond the limit", 413, `{"error":"body larger than 10 bytes"}`)
	// Without a declared length the limit shows while streaming.
	req, _ := http.NewRequest("POST", s.srv.URL+"/messages/big", io.MultiReader(strings.NewReader("01234"), strings.NewReader("56789xyz")))
	req.ContentLength = -1
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || string(b) != `{"error":"body larger than 10 bytes"}` {
		t.Errorf("chunked body beyond the limit: %d %s", resp.StatusCode, b)
	}
	// Bodies read whole are bounded by the smaller MaxBufferedBody.
	s.do("PATCH", "/properties/big", `{"retry":10}`, "Content-Type", "application/json").
		want(t, "properties beyond the buffered limit", 413, `{"error":"body larger than 8 bytes"}`)
	s.do("POST", "/messages?qre=big", "012345678").want(t, "push-all beyond the buffered limit", 413, `{"error":"body larger than 8 bytes"}`)
	// A header the core would store, beyond its bound: 431 before the body.
	long := strings.Repeat("a", mapping.MaxHeaderValue+1)
	s.do("POST", "/messages/big", "x", "Content-Type", long).wantError(t, "long content-type", 431, "content-type")
}

func TestBatch(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	body := "--XX\r\ncontent-type: text/plain\r\n\r\none\r\n--XX\r\n\r\ntwo\r\n--XX--\r\n"
	s.do("POST", "/messages/b?batch=1", body, "Content-Type", multipartXX).want(t, "batch", 200, `{"accum":"no","count":2}`)
	n := s.core.Batches()
	if n != 1 {
		t.Fatalf("%d batches reached the core", n)
	}
	s.do("GET", "/messages/b?t=0", "").want(t, "first of the batch", 200, "one")
	s.do("POST", "/messages/b?batch=1", "garbage", "Content-Type", multipartXX).wantError(t, "bad batch", 400, "boundary")
}

func TestInventory(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	s.do("GET", "/queues", "").want(t, "no queues", 200, `{"queues":[]}`)
	s.do("POST", "/messages/inv-a", "x").want(t, "push", 200, "*")
	s.do("POST", "/messages/inv-b", "x").want(t, "push", 200, "*")
	s.core.FailSize("inv-b", fmt.Errorf("stream info: %w", gateway.ErrUnavailable))
	s.do("GET", "/queues", "").want(t, "queues", 200,
		`{"queues":[{"name":"inv-a","size":1},{"name":"inv-b","size":null,"error":"stream info: jetstream unavailable"}]}`)
	s.do("GET", "/queues/inv-a", "").want(t, "detail", 200,
		`{"accumulating":0,"bytes":10,"dead_letters":0,"delayed":0,"in_flight":0,"name":"inv-a","props":{"accum":0,"retry":2,"timeout":30},"size":1}`)
	s.do("GET", "/queues/none", "").wantError(t, "detail of no queue", 404, "not found")
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	s.do("POST", "/messages/dl", "x").want(t, "push", 200, "*")
	s.do("GET", "/queues/dl/dead", "").want(t, "no dead letters", 200, `{"size":0}`)
	s.do("GET", "/queues/dl/dead/head", "").want(t, "no head", 204, "")
	died := time.Date(2024, 5, 6, 7, 8, 9, 10, time.UTC)
	s.core.AddDeadLetters("dl",
		gateway.DeadLetter{Message: gateway.Message{ContentType: textPlain, Body: []byte("d1"), Kept: []gateway.Header{{Name: "x-trace", Value: "t"}}}, Deliveries: 3, DiedAt: died},
		gateway.DeadLetter{Message: gateway.Message{Body: []byte("d2")}, Deliveries: 3, DiedAt: died},
		gateway.DeadLetter{Message: gateway.Message{Body: []byte("d3")}, Deliveries: 3, DiedAt: died},
	)
	s.do("GET", "/queues/dl/dead", "").want(t, "dead letters", 200, `{"size":3}`)
	a := s.do("GET", "/queues/dl/dead/head", "")
	a.want(t, "head", 200, "d1")
	for k, v := range map[string]string{
		"Content-Type": textPlain, "X-Lmq-Queue-Name": "dl", "X-Lmq-Deliveries": "3",
		"X-Lmq-Dead-At": "2024-05-06T07:08:09.00000001Z", "X-Trace": "t",
		"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox",
	} {
		if got := a.header.Get(k); got != v {
			t.Errorf("head: %s %q, want %q", k, got, v)
		}
	}
	s.do("POST", "/queues/dl/dead/respawn?n=2", "").want(t, "respawn", 200, `{"respawned":2}`)
	s.do("POST", "/queues/dl/dead/respawn", "").want(t, "respawn one", 200, `{"respawned":1}`)
	for _, n := range []string{"0", "-1", "x"} {
		s.do("POST", "/queues/dl/dead/respawn?n="+n, "").wantError(t, "respawn n="+n, 400, "positive")
	}
	s.core.AddDeadLetters("dl", gateway.DeadLetter{}, gateway.DeadLetter{})
	s.do("DELETE", "/queues/dl/dead", "").want(t, "delete", 200, `{"deleted":2}`)
	s.do("GET", "/queues/none/dead", "").wantError(t, "dead letters of no queue", 404, "not found")
}

// TestErrorMapping: each of the core's errors reaches the client as its
// status code, with {"error": the error's text}, on every route.
func TestErrorMapping(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err        error
		status     int
		retryAfter string
		state      string
	}{
		{fmt.Errorf("%w: bad", gateway.ErrInvalid), 400, "", ""},
		{fmt.Errorf("%w: bad props", mapping.ErrInvalidProps), 400, "", ""},
		{fmt.Errorf("delivery x: %w", gateway.ErrNotFound), 404, "", ""},
		{fmt.Errorf("delivery x: %w", gateway.ErrAlreadyAcked), 404, "", "acked"},
		{fmt.Errorf("%w: big", gateway.ErrTooLarge), 413, "", ""},
		{fmt.Errorf("%w: long", gateway.ErrHeaderTooLarge), 431, "", ""},
		{fmt.Errorf("stream: %w", gateway.ErrUnavailable), 503, "1", ""},
		{fmt.Errorf("%w (limit 3); try again", gateway.ErrBusy), 503, "1", ""},
		{fmt.Errorf("ack: %w", gateway.ErrUnknown), 504, "", ""},
		{errors.New("something else"), 500, "", ""},
	} {
		s := startAPI(t, Options{})
		s.do("POST", "/messages/e", "x").want(t, "push", 200, "*")
		id := s.do("GET", "/messages/e?t=0", "").header.Get("X-Lmq-Message-Id")
		for _, m := range []string{"PushStream", "PushAll", "Pull", "PullAny", "Reply", "DeleteQueue", "QueueProps",
			"UpdateProps", "ResetProps", "DefaultProps", "SetDefaultProps", "PushBatch", "QueueDetail",
			"DeadLetterHead", "RespawnDeadLetters", "DeleteDeadLetters"} {
			s.core.Fail(m, c.err)
		}
		for _, r := range []struct{ method, path, body, ctype string }{
			{"POST", "/messages/e", "x", ""},
			{"POST", "/messages?qre=e", "x", ""},
			{"GET", "/messages/e?t=1", "", ""},
			{"GET", "/messages?qre=e", "", ""},
			{"POST", "/messages/e/" + id + "?reply=ack", "", ""},
			{"DELETE", "/queues/e", "", ""},
			{"GET", "/properties/e", "", ""},
			{"PATCH", "/properties/e", `{"retry":1}`, "application/json"},
			{"DELETE", "/properties/e", "", ""},
			{"GET", "/properties", "", ""},
			{"PUT", "/properties", `[]`, "application/json"},
			{"POST", "/messages/e?batch=1", "\x91\x92\x80\xa1x", mapping.ContentTypeMsgpack},
			{"GET", "/queues/e", "", ""},
			{"GET", "/queues/e/dead", "", ""},
			{"GET", "/queues/e/dead/head", "", ""},
			{"POST", "/queues/e/dead/respawn", "", ""},
			{"DELETE", "/queues/e/dead", "", ""},
		} {
			what := fmt.Sprintf("%s %s with %q", r.method, r.path, c.err)
			a := s.do(r.method, r.path, r.body, "Content-Type", r.ctype)
			a.want(t, what, c.status, `{"error":"`+c.err.Error()+`"}`)
			if got := a.header.Get("Retry-After"); got != c.retryAfter {
				t.Errorf("%s: Retry-After %q, want %q", what, got, c.retryAfter)
			}
			if got := a.header.Get("X-Lmq-Delivery-State"); got != c.state {
				t.Errorf("%s: X-Lmq-Delivery-State %q, want %q", what, got, c.state)
			}
		}
	}
}

// TestOptionsHooks: Mount adds routes, which the strict query parsing covers
// too, and Middleware wraps everything, unrouted requests included.
func TestOptionsHooks(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	s := startAPI(t, Options{
		Mount: func(t *route.Table) {
			t.HandleFunc("/extra", route.Authenticated, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "extra") }, http.MethodGet)
		},
		Middleware: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.URL.Path)
				mu.Unlock()
				next.ServeHTTP(w, r)
			})
		},
	})
	s.do("GET", "/extra", "").want(t, "mounted route", 200, "extra")
	s.do("GET", "/extra?%", "").wantError(t, "mounted route, malformed query", 400, "malformed query")
	s.do("GET", "/nope", "").want(t, "unrouted", 404, `{"error":"not found"}`)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"/extra", "/extra", "/nope"}; !reflect.DeepEqual(seen, want) {
		t.Errorf("middleware saw %v, want %v", seen, want)
	}
}
