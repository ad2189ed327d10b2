package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// openAPIFile is the document the gateway serves at /openapi.yaml.
const openAPIFile = "../docs/openapi.yaml"

// apiChecker sends requests to a gateway and validates every answer against
// docs/openapi.yaml: its status must be listed for the operation, its
// declared headers present and valid, its body valid for its content type.
// So the document cannot drift from what the gateway answers.
type apiChecker struct {
	t      *testing.T
	c      *Client
	base   string
	doc    *openapi3.T
	router routers.Router
}

func newAPIChecker(t *testing.T, g *Gateway) *apiChecker {
	t.Helper()
	ctx := context.Background()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(openAPIFile)
	if err != nil {
		t.Fatalf("load %s: %v", openAPIFile, err)
	}
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("%s is not a valid OpenAPI document: %v", openAPIFile, err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("%s: openapi %q, want 3.1", openAPIFile, doc.OpenAPI)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("router of %s: %v", openAPIFile, err)
	}
	return &apiChecker{t: t, c: g.Client(t), base: g.HTTP, doc: doc, router: router}
}

// do sends a request, checks its status is want and validates the answer
// against the operation the document lists for method and path.
func (a *apiChecker) do(want int, method, path string, body []byte, hdr ...string) *Response {
	a.t.Helper()
	r := a.c.Do(method, path, body, hdr...)
	if r.Status != want {
		a.t.Fatalf("%s %s: got %v, want status %d", method, path, r, want)
	}
	// The older paths are documented as aliases of the current ones.
	docPath := path
	for old, cur := range map[string]string{"/msgs": "/messages", "/props": "/properties"} {
		if rest, ok := strings.CutPrefix(path, old); ok && (rest == "" || rest[0] == '/' || rest[0] == '?') {
			docPath = cur + rest
		}
	}
	req, err := http.NewRequest(method, a.base+docPath, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	route, params, err := a.router.FindRoute(req)
	if err != nil {
		a.t.Fatalf("%s %s: not in the document: %v", method, path, err)
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route, Options: opts,
		},
		Status:  r.Status,
		Header:  r.Header,
		Body:    io.NopCloser(bytes.NewReader(r.Body)),
		Options: opts,
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		a.t.Errorf("%s %s: answer %v does not match %s: %v", method, path, r, openAPIFile, err)
	}
	// Headers the gateway adds on its own account must be documented too.
	if ref := route.Operation.Responses.Status(r.Status); ref != nil {
		a.checkUndeclared(method, path, r, ref.Value.Headers)
	}
	return r
}

// checkUndeclared fails on a gateway header (x-lmq-*, Retry-After,
// WWW-Authenticate) that the response object does not declare.
func (a *apiChecker) checkUndeclared(method, path string, r *Response, declared openapi3.Headers) {
	a.t.Helper()
	for name := range r.Header {
		lower := strings.ToLower(name)
		if !strings.HasPrefix(lower, "x-lmq-") && lower != "retry-after" && lower != "www-authenticate" {
			continue
		}
		found := false
		for d := range declared {
			if strings.EqualFold(d, name) {
				found = true
			}
		}
		if !found {
			a.t.Errorf("%s %s: header %s (status %d) is not declared in %s", method, path, name, r.Status, openAPIFile)
		}
	}
}

// unrouted sends a request the document has no operation for (an unknown
// path, a method a path does not serve) and validates the answer against
// the named component response.
func (a *apiChecker) unrouted(want int, component, method, path string, body []byte, hdr ...string) *Response {
	a.t.Helper()
	r := a.c.Do(method, path, body, hdr...)
	if r.Status != want {
		a.t.Fatalf("%s %s: got %v, want status %d", method, path, r, want)
	}
	resp := a.doc.Components.Responses[component]
	if resp == nil {
		a.t.Fatalf("%s has no response component %s", openAPIFile, component)
	}
	a.validateBody(method, path, r, resp.Value)
	a.checkUndeclared(method, path, r, resp.Value.Headers)
	return r
}

// validateBody checks a JSON or text answer against a response object.
func (a *apiChecker) validateBody(method, path string, r *Response, resp *openapi3.Response) {
	a.t.Helper()
	mt := resp.Content.Get(r.Header.Get("Content-Type"))
	if mt == nil {
		a.t.Errorf("%s %s: content type %q not in the document", method, path, r.Header.Get("Content-Type"))
		return
	}
	if mt.Schema == nil {
		return
	}
	var v any = string(r.Body)
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(r.Body, &v); err != nil {
			a.t.Errorf("%s %s: body is not JSON: %v", method, path, err)
			return
		}
	}
	if err := mt.Schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse()); err != nil {
		a.t.Errorf("%s %s: body %q does not match %s: %v", method, path, r.Body, openAPIFile, err)
	}
}

// TestOpenAPI drives every endpoint of the HTTP API through its answers
// (successes and errors) and validates each against docs/openapi.yaml.
func TestOpenAPI(t *testing.T) {
	g := Start(t, "--max-body", "65536")
	a := newAPIChecker(t, g)
	const ctJSON = "application/json"

	// The document served is the file.
	file, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	r := a.do(200, "GET", "/openapi.yaml", nil)
	if !bytes.Equal(r.Body, file) {
		t.Errorf("GET /openapi.yaml: served %d bytes that differ from %s (%d bytes)", len(r.Body), openAPIFile, len(file))
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/yaml" {
		t.Errorf("GET /openapi.yaml: content-type %q, want application/yaml", ct)
	}

	// Health.
	a.do(200, "GET", "/healthz", nil)
	a.do(200, "GET", "/readyz", nil)
	a.do(200, "GET", "/readyz?verbose", nil)

	// Push and pull, reply with ack, nack, ext.
	a.do(200, "POST", "/messages/oa", []byte("one"), "Content-Type", "text/plain")
	a.do(200, "POST", "/messages/oa?delay=0&ttl=60", []byte("two"), "Idempotency-Key", "k-1")
	r = a.do(200, "GET", "/messages/oa?t="+msgWait, nil)
	a.do(204, "POST", "/messages/oa/"+r.ID()+"?reply=ext", nil)
	a.do(200, "GET", "/queues/oa/deliveries", nil)
	a.do(200, "GET", "/deliveries/"+r.ID(), nil)
	a.do(404, "GET", "/queues/oa-none/deliveries", nil)
	a.do(204, "POST", "/messages/oa/"+r.ID()+"?reply=ack", nil)
	a.do(404, "POST", "/messages/oa/"+r.ID()+"?reply=ack", nil) // done already
	r = a.do(200, "GET", "/messages/oa?t="+msgWait, nil)
	a.do(204, "POST", "/messages/oa/"+r.ID()+"?reply=nack", nil)
	r = a.do(200, "GET", "/messages/oa?t="+msgWait, nil)
	a.do(204, "POST", "/messages/oa/"+r.ID()+"?reply=ack", nil)
	a.do(204, "GET", "/messages/oa?t=0", nil)
	a.do(404, "POST", "/messages/oa/00000000-0000-0000-0000-000000000000?reply=ack", nil)
	a.do(404, "GET", "/deliveries/00000000-0000-0000-0000-000000000000", nil)
	a.do(400, "POST", "/messages/oa/x?reply=maybe", nil)
	// A browser's request for a page of another origin.
	a.do(403, "POST", "/messages/oa", []byte("x"), "Origin", "http://evil.example", "Content-Type", "text/plain")
	a.do(403, "DELETE", "/queues/oa", nil, "Sec-Fetch-Site", "cross-site")

	// Push to all, pull any.
	a.do(200, "POST", "/messages?qre=^oa$", []byte("all"))
	a.do(200, "POST", "/messages?qre=^none$", []byte("all")) // {}
	r = a.do(200, "GET", "/messages?qre=^oa$&t="+msgWait, nil)
	a.do(204, "POST", "/messages/oa/"+r.ID()+"?reply=ack", nil)
	a.do(204, "GET", "/messages?qre=^oa$&t=0", nil)
	a.do(400, "GET", "/messages?t=0", nil) // no qre

	// Batch.
	a.do(200, "POST", "/messages/oa?batch=1",
		[]byte("--XX\r\ncontent-type: text/plain\r\n\r\none\r\n--XX\r\n\r\ntwo\r\n--XX--\r\n"),
		"Content-Type", "multipart/mixed; boundary=XX")
	a.do(400, "POST", "/messages/oa?batch=1", []byte("x"), "Content-Type", "text/plain")

	// Compound messages, in both formats.
	a.do(204, "PATCH", "/properties/oa-acc", []byte(`{"accum":0.05}`), "Content-Type", ctJSON)
	for _, cf := range []string{"multipart", "msgpack"} {
		a.do(200, "POST", "/messages/oa-acc", []byte("p1"))
		a.do(200, "POST", "/messages/oa-acc", []byte("p2"))
		r = a.do(200, "GET", "/messages/oa-acc?cf="+cf+"&t="+msgWait, nil)
		if r.Header.Get(hType) != "compound" {
			t.Fatalf("cf=%s: got %v, want a compound message", cf, r)
		}
		a.do(204, "POST", "/messages/oa-acc/"+r.ID()+"?reply=ack", nil)
	}

	// Properties of a queue, and the default list.
	a.do(200, "GET", "/properties/oa", nil)
	a.do(204, "PATCH", "/properties/oa", []byte(`{"retry":5,"timeout":10,"ttl":60,"dead_letter":false,"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["user-agent"]]]}}`), "Content-Type", ctJSON)
	a.do(200, "GET", "/properties/oa", nil)
	a.do(204, "DELETE", "/properties/oa", nil)
	a.do(400, "PATCH", "/properties/oa", []byte(`{"retry":"x"}`), "Content-Type", ctJSON)
	a.do(415, "PATCH", "/properties/oa", []byte(`{}`), "Content-Type", "text/plain")
	a.do(200, "GET", "/properties", nil) // []
	a.do(204, "PUT", "/properties", []byte(`[["^oa-d",{"accum":0}],[".*",{"retry":2}]]`), "Content-Type", ctJSON)
	a.do(200, "GET", "/properties", nil)
	a.do(400, "PUT", "/properties", []byte(`[["(",{}]]`), "Content-Type", ctJSON)
	a.do(415, "PUT", "/properties", []byte(`[]`))
	a.do(204, "DELETE", "/properties", nil)

	// Dead letters: retry 0, so a nack uses up the only delivery.
	a.do(204, "PATCH", "/properties/oa-dead", []byte(`{"dead_letter":true,"retry":0}`), "Content-Type", ctJSON)
	a.do(200, "POST", "/messages/oa-dead", []byte("doomed"), "Content-Type", "text/plain")
	r = a.do(200, "GET", "/messages/oa-dead?t="+msgWait, nil)
	a.do(204, "POST", "/messages/oa-dead/"+r.ID()+"?reply=nack", nil)
	// The dead letter may be stored after the nack is answered.
	testwait.For(t, "the dead letter stored", func() bool {
		var dead struct{ Size int }
		if err := json.Unmarshal(a.do(200, "GET", "/queues/oa-dead/dead", nil).Body, &dead); err != nil {
			t.Fatal(err)
		}
		return dead.Size == 1
	})
	a.do(200, "GET", "/queues/oa-dead/dead/head", nil)
	// A dead-letter queue instead: shown in the properties while set.
	a.do(204, "PATCH", "/properties/oa-dead", []byte(`{"dead_letter_queue":"oa-dlq"}`), "Content-Type", ctJSON)
	a.do(200, "GET", "/properties/oa-dead", nil)
	a.do(400, "PATCH", "/properties/oa-dead", []byte(`{"dead_letter_queue":"oa-dead"}`), "Content-Type", ctJSON)
	a.do(204, "PATCH", "/properties/oa-dead", []byte(`{"dead_letter_queue":""}`), "Content-Type", ctJSON)
	a.do(200, "POST", "/queues/oa-dead/dead/respawn?n=1", nil)
	a.do(400, "POST", "/queues/oa-dead/dead/respawn?n=0", nil)
	a.do(204, "GET", "/queues/oa-dead/dead/head", nil)
	a.do(200, "DELETE", "/queues/oa-dead/dead", nil)
	a.do(404, "GET", "/queues/oa-never/dead", nil)

	// Waiting messages by id.
	a.do(200, "POST", "/messages/oa-wait", []byte("w"), "Content-Type", "text/plain")
	r = a.do(200, "GET", "/queues/oa-wait/messages?n=5&body=1", nil)
	var waiting []struct{ ID uint64 }
	if err := json.Unmarshal(r.Body, &waiting); err != nil || len(waiting) != 1 {
		t.Fatalf("waiting messages: %s, %v", r.Body, err)
	}
	a.do(200, "GET", "/queues/oa-wait/messages", nil)
	a.do(204, "DELETE", "/queues/oa-wait/messages/"+strconv.FormatUint(waiting[0].ID, 10), nil)
	a.do(404, "DELETE", "/queues/oa-wait/messages/"+strconv.FormatUint(waiting[0].ID, 10), nil)
	a.do(400, "DELETE", "/queues/oa-wait/messages/0", nil)
	a.do(400, "GET", "/queues/oa-wait/messages?n=0", nil)
	a.do(404, "GET", "/queues/oa-never/messages", nil)

	// Inventory, statistics, metrics.
	a.do(200, "GET", "/queues", nil)
	a.do(200, "GET", "/queues/oa", nil)
	a.do(404, "GET", "/queues/oa-never", nil)
	a.do(200, "GET", "/stats", nil)
	a.do(200, "GET", "/metrics", nil)

	// Errors.
	a.do(400, "GET", "/messages/oa?t=abc", nil)
	a.do(400, "GET", "/messages/oa?cf=xml", nil)
	a.do(400, "GET", "/messages/oa?t=%zz", nil)
	a.do(400, "GET", "/stats?x=%zz", nil)
	a.do(413, "POST", "/messages/oa", make([]byte, 65537))
	a.do(431, "POST", "/messages/oa", []byte("x"), "Content-Type", "text/plain; x="+strings.Repeat("a", 5000))
	// Beyond --max-header-bytes: Go's server answers before any route.
	a.unrouted(431, "HeadersTooLarge", "GET", "/messages/oa?t=0", nil, "X-Big", strings.Repeat("a", 100<<10))
	a.unrouted(404, "UnknownPath", "GET", "/nowhere", nil)
	a.unrouted(405, "MethodNotAllowed", "PUT", "/messages/oa", nil)
	a.unrouted(405, "MethodNotAllowed", "POST", "/stats", nil)

	// The older paths (LMQ up to 0.6.1).
	a.do(200, "POST", "/msgs/oa", []byte("old"))
	r = a.do(200, "GET", "/msgs/oa?t="+msgWait, nil)
	a.do(204, "POST", "/msgs/oa/"+r.ID()+"?reply=ack", nil)
	a.do(200, "GET", "/props/oa", nil)
	a.do(200, "GET", "/props", nil)

	// Queue control: properties, purge.
	a.do(204, "PATCH", "/properties/oa-ctl", []byte(`{"paused":true,"max_inflight":3}`), "Content-Type", ctJSON)
	a.do(200, "GET", "/properties/oa-ctl", nil)
	a.do(204, "PATCH", "/properties/oa-ctl", []byte(`{"paused":false}`), "Content-Type", ctJSON)
	a.do(400, "PATCH", "/properties/oa-ctl", []byte(`{"max_inflight":-1}`), "Content-Type", ctJSON)
	a.do(200, "POST", "/messages/oa-ctl", []byte("purged"), "Content-Type", "text/plain")
	a.do(204, "DELETE", "/queues/oa-ctl/messages", nil)
	a.do(404, "DELETE", "/queues/oa-never/messages", nil)

	// Deleting a queue.
	a.do(204, "DELETE", "/queues/oa-acc", nil)
	a.do(404, "DELETE", "/queues/oa-acc", nil)
}

// TestOpenAPIAuth checks the answers of a gateway with authentication
// against the document: 401 everywhere but health, /openapi.yaml included.
func TestOpenAPIAuth(t *testing.T) {
	g := newOpsGateway(t) // Start's readiness probe has no credential
	g.opsLaunch(nil, "--http-listen", strings.TrimPrefix(g.HTTP, "http://"), "--auth-token", "s3cret")
	a := newAPIChecker(t, g)
	a.do(401, "GET", "/openapi.yaml", nil)
	a.do(401, "GET", "/stats", nil)
	a.do(401, "POST", "/messages/oa", []byte("x"))
	a.do(200, "GET", "/healthz", nil)
	a.do(200, "GET", "/openapi.yaml", nil, "Authorization", "Bearer s3cret")
}
