package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// Tokens (issue 18, lmstfy's namespaces): tokens scoped to queues with
// rights, made with "lmq-gateway token" and POST /tokens, checked on every
// HTTP request, revoked on every gateway of the same NATS.

const tokensOperator = "operator-s3cret"

// tokensGateway starts a gateway with --tokens and the operator's
// --auth-token in front of natsURL, waiting for /healthz (Start's readiness
// probe has no credential).
func tokensGateway(t *testing.T, natsURL string) *Gateway {
	t.Helper()
	g := newGateway(t)
	g.NATSURL = natsURL
	g.args = []string{"--rpc-listen", anyPort, "--nats-url", natsURL}
	g.opsLaunch(nil, "--http-listen", strings.TrimPrefix(g.HTTP, "http://"),
		"--tokens", "--auth-token", tokensOperator, "--access-log")
	return g
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// tokensCreate makes a token through POST /tokens with the operator's
// credential.
func tokensCreate(t *testing.T, c *Client, spec string) string {
	t.Helper()
	r := c.Expect(http.StatusCreated, http.MethodPost, "/tokens", []byte(spec), append(bearer(tokensOperator), "Content-Type", "application/json")...)
	var out struct {
		Token string `json:"token"`
		ID    string `json:"id"`
	}
	if err := json.Unmarshal(r.Body, &out); err != nil || out.Token == "" || !strings.HasPrefix(out.Token, out.ID+".") {
		t.Fatalf("POST /tokens: %v (%v)", r, err)
	}
	return out.Token
}

// tokensForbidden expects a 403 whose plain-text body says msg.
func tokensForbidden(t *testing.T, c *Client, method, path string, body []byte, tok, msg string) {
	t.Helper()
	r := c.Expect(http.StatusForbidden, method, path, body, bearer(tok)...)
	if got := strings.TrimSpace(string(r.Body)); got != msg {
		t.Errorf("%s %s: 403 says %q, want %q", method, path, got, msg)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("%s %s: 403 content-type %q, want text/plain", method, path, ct)
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	natsURL := StartNATS(t)
	a := tokensGateway(t, natsURL)
	b := tokensGateway(t, natsURL)
	c := a.Client(t)
	op := bearer(tokensOperator)

	// Without a credential, or with a wrong one: 401; health needs none.
	c.Expect(http.StatusUnauthorized, http.MethodGet, "/messages/orders.a?t=0", nil)
	c.Expect(http.StatusUnauthorized, http.MethodGet, "/messages/orders.a?t=0", nil, bearer("0123456789abcdef.wrong")...)
	c.Expect(http.StatusUnauthorized, http.MethodGet, "/messages/orders.a?t=0&token=nonsense", nil)
	c.Expect(http.StatusOK, http.MethodGet, "/healthz", nil)

	// The operator's credential has every right: it makes the queues.
	for _, q := range []string{"orders.a", "orders.b", "other.x"} {
		c.Expect(http.StatusNoContent, http.MethodGet, "/messages/"+Q(q)+"?t=0", nil, op...)
	}

	// A push token made with the subcommand.
	out := opsRun(t, nil, "token", "create", "--http", a.HTTP, "--auth-token", tokensOperator,
		"--name", "orders", "--prefix", "orders.", "--rights", "push")
	pushTok := strings.TrimSpace(out)
	if strings.Count(pushTok, "\n") != 0 || !strings.Contains(pushTok, ".") {
		t.Fatalf("token create printed %q, want the token alone", out)
	}
	pullTok := tokensCreate(t, c, `{"name":"orders","prefix":"orders.","rights":["pull"]}`)
	reTok := tokensCreate(t, c, `{"name":"ab","regexp":"orders\\.(a|b)","rights":["pull","admin"]}`)
	adminTok := tokensCreate(t, c, `{"name":"root","rights":["admin"]}`)

	t.Run("push allowed, pull refused", func(t *testing.T) {
		c := a.Client(t)
		c.Expect(http.StatusOK, http.MethodPost, "/messages/orders.a", []byte("one"), bearer(pushTok)...)
		tokensForbidden(t, c, http.MethodPost, "/messages/other.x", []byte("x"), pushTok, `token lacks "push" on queue "other.x"`)
		tokensForbidden(t, c, http.MethodGet, "/messages/orders.a?t=0", nil, pushTok, `token lacks "pull" on queue "orders.a"`)
		tokensForbidden(t, c, http.MethodPost, "/messages/orders.a/x?reply=ack", nil, pushTok, `token lacks "pull" on queue "orders.a"`)
		tokensForbidden(t, c, http.MethodGet, "/messages?qre=.&t=0", nil, pushTok, `token lacks "pull"`)
		tokensForbidden(t, c, http.MethodPatch, "/properties/orders.a", []byte(`{"timeout":30}`), pushTok, `token lacks "admin" on queue "orders.a"`)
		tokensForbidden(t, c, http.MethodGet, "/tokens", nil, pushTok, `token lacks "admin" on every queue`)
		tokensForbidden(t, c, http.MethodGet, "/metrics", nil, pushTok, `token lacks "admin" on every queue`)

		// The pull token, as lmstfy's clients send it: ?token=.
		m := c.Expect(http.StatusOK, http.MethodGet, "/messages/orders.a?t=0&token="+url.QueryEscape(pullTok), nil)
		if string(m.Body) != "one" {
			t.Fatalf("pull: %v", m)
		}
		c.Expect(http.StatusNoContent, http.MethodPost, "/messages/orders.a/"+url.PathEscape(m.ID())+"?reply=ack&token="+url.QueryEscape(pullTok), nil)
		tokensForbidden(t, c, http.MethodGet, "/messages/other.x?t=0", nil, pullTok, `token lacks "pull" on queue "other.x"`)

		// The regexp matches whole names only.
		c.Expect(http.StatusNoContent, http.MethodGet, "/messages/orders.b?t=0", nil, bearer(reTok)...)
		tokensForbidden(t, c, http.MethodGet, "/messages/orders.c?t=0", nil, reTok, `token lacks "pull" on queue "orders.c"`)
		tokensForbidden(t, c, http.MethodGet, "/messages/orders.ab?t=0", nil, reTok, `token lacks "pull" on queue "orders.ab"`)
		c.Expect(http.StatusNoContent, http.MethodPatch, "/properties/orders.b", []byte(`{"timeout":30}`),
			append(bearer(reTok), "Content-Type", "application/json")...)
		tokensForbidden(t, c, http.MethodPut, "/properties", []byte(`[]`), reTok, `token lacks "admin" on every queue`)
		// A dead-letter queue must be one of the token's queues too.
		r := c.Expect(http.StatusForbidden, http.MethodPatch, "/properties/orders.b", []byte(`{"dead_letter_queue":"other.x"}`),
			append(bearer(reTok), "Content-Type", "application/json")...)
		if got, want := string(r.Body), `token lacks \"push\" on dead_letter_queue \"other.x\"`; !strings.Contains(got, want) {
			t.Errorf("dead_letter_queue out of scope: 403 says %s, want %s in it", got, want)
		}
		c.Expect(http.StatusNoContent, http.MethodPatch, "/properties/orders.b", []byte(`{"dead_letter_queue":"orders.a"}`),
			append(bearer(reTok), "Content-Type", "application/json")...)

		// An admin token on every queue manages tokens and reads /metrics.
		c.Expect(http.StatusOK, http.MethodGet, "/tokens", nil, bearer(adminTok)...)
		c.Expect(http.StatusOK, http.MethodGet, "/metrics", nil, bearer(adminTok)...)

		// The secret never reaches the access log.
		_, secret, _ := strings.Cut(pullTok, ".")
		if strings.Contains(a.Output(), secret) {
			t.Error("the access log shows a token's secret")
		}
		if !strings.Contains(a.Output(), "token=REDACTED") {
			t.Error("the access log does not show the redacted token parameter")
		}
	})

	t.Run("stats filtered", func(t *testing.T) {
		c := a.Client(t)
		r := c.Expect(http.StatusOK, http.MethodGet, "/stats", nil, bearer(pushTok)...)
		var doc struct {
			Queues map[string]json.RawMessage `json:"queues"`
		}
		if err := json.Unmarshal(r.Body, &doc); err != nil {
			t.Fatal(err)
		}
		if _, ok := doc.Queues["other.x"]; ok || doc.Queues["orders.a"] == nil {
			t.Errorf("/stats with a token scoped to orders.: %s", r.Body)
		}
		// The collection behind /stats is shared and cached: the token's
		// scope must not cut it for the next caller. A new queue shows when
		// the token's request made a fresh collection.
		c.Expect(http.StatusNoContent, http.MethodGet, "/messages/orders.fresh?t=0", nil, op...)
		if !testwait.Until(startTimeout, func() bool {
			r := c.Do(http.MethodGet, "/stats", nil, bearer(pushTok)...)
			return r.Status == http.StatusOK && strings.Contains(string(r.Body), `"orders.fresh"`)
		}) {
			t.Fatal("/stats never showed the new queue")
		}
		r = c.Expect(http.StatusOK, http.MethodGet, "/stats", nil, op...)
		doc.Queues = nil
		if err := json.Unmarshal(r.Body, &doc); err != nil {
			t.Fatal(err)
		}
		if _, ok := doc.Queues["other.x"]; !ok {
			t.Errorf("/stats with the operator's credential after a token's: %s", r.Body)
		}

		var list struct {
			Queues []struct{ Name string } `json:"queues"`
		}
		r = c.Expect(http.StatusOK, http.MethodGet, "/queues", nil, bearer(pushTok)...)
		if err := json.Unmarshal(r.Body, &list); err != nil {
			t.Fatal(err)
		}
		for _, q := range list.Queues {
			if !strings.HasPrefix(q.Name, "orders.") {
				t.Errorf("GET /queues with a token scoped to orders.: %s", r.Body)
			}
		}
		tokensForbidden(t, c, http.MethodGet, "/queues/other.x", nil, pushTok, `token lacks "read" on queue "other.x"`)
		c.Expect(http.StatusOK, http.MethodGet, "/queues/orders.a", nil, bearer(pushTok)...)
	})

	t.Run("qre filtered", func(t *testing.T) {
		c := a.Client(t)
		// Push-all with a token reaches its queues only.
		r := c.Expect(http.StatusOK, http.MethodPost, "/messages?qre=.", []byte("all"), bearer(pushTok)...)
		var got map[string]any
		if err := json.Unmarshal(r.Body, &got); err != nil {
			t.Fatalf("push-all: %v", r)
		}
		names := make([]string, 0, len(got))
		for q := range got {
			names = append(names, q)
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"orders.a", "orders.b", "orders.fresh"}) {
			t.Errorf("push-all with a token scoped to orders.: reached %v", names)
		}
		c.Expect(http.StatusNoContent, http.MethodGet, "/messages/other.x?t=0", nil, op...)
		// Pull-any sees the queues in scope only: other.x's message is not
		// for this token.
		c.Expect(http.StatusOK, http.MethodPost, "/messages/other.x", []byte("not yours"), op...)
		for range 3 {
			m := c.Expect(http.StatusOK, http.MethodGet, "/messages?qre=.&t=0", nil, bearer(pullTok)...)
			if string(m.Body) != "all" {
				t.Fatalf("pull-any: %v", m)
			}
		}
		c.Expect(http.StatusNoContent, http.MethodGet, "/messages?qre=.&t=0", nil, bearer(pullTok)...)
	})

	t.Run("metrics per namespace", func(t *testing.T) {
		c := a.Client(t)
		r := c.Expect(http.StatusOK, http.MethodGet, "/metrics", nil, op...)
		for _, want := range []string{
			`lmq_namespace_requests_total{allowed="true",namespace="orders",right="push"}`,
			`lmq_namespace_requests_total{allowed="false",namespace="orders",right="pull"}`,
			`lmq_namespace_requests_total{allowed="true",namespace="*",right="pull"}`,
			`lmq_tokens 4`,
		} {
			if !strings.Contains(string(r.Body), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})

	t.Run("revocation reaches every gateway", func(t *testing.T) {
		cb := b.Client(t)
		cb.Expect(http.StatusOK, http.MethodGet, "/stats", nil, bearer(pullTok)...)
		list := opsRun(t, nil, "token", "list", "--http", a.HTTP, "--auth-token", adminTok)
		id, _, _ := strings.Cut(pullTok, ".")
		_, secret, _ := strings.Cut(pullTok, ".")
		if !strings.Contains(list, id) || strings.Contains(list, secret) {
			t.Fatalf("token list:\n%s", list)
		}
		opsRun(t, nil, "token", "revoke", "--http", a.HTTP, "--auth-token", tokensOperator, id)
		a.Client(t).Expect(http.StatusUnauthorized, http.MethodGet, "/stats", nil, bearer(pullTok)...)
		if !testwait.Until(startTimeout, func() bool {
			return cb.Do(http.MethodGet, "/stats", nil, bearer(pullTok)...).Status == http.StatusUnauthorized
		}) {
			t.Fatal("the second gateway still accepts the revoked token")
		}
		// The other tokens still work there, and a revoked id is gone.
		cb.Expect(http.StatusOK, http.MethodGet, "/stats", nil, bearer(pushTok)...)
		cb.Expect(http.StatusNotFound, http.MethodDelete, "/tokens/"+id, nil, op...)
	})

	t.Run("bad specs", func(t *testing.T) {
		c := a.Client(t)
		for i, spec := range []string{
			`{"name":"x","rights":[]}`,
			`{"name":"x","rights":["fly"]}`,
			`{"name":"","rights":["push"]}`,
			`{"name":"a b","rights":["push"]}`,
			`{"name":"x","prefix":"p","regexp":"r","rights":["push"]}`,
			`{"name":"x","regexp":"(","rights":["push"]}`,
			`{"name":"x","rights":["push"],"unknown":1}`,
			`not json`,
		} {
			r := c.Expect(http.StatusBadRequest, http.MethodPost, "/tokens", []byte(spec), append(op, "Content-Type", "application/json")...)
			if !strings.Contains(string(r.Body), `"error"`) {
				t.Errorf("spec %s: %v", strconv.Itoa(i), r)
			}
		}
	})
}

// TestTokensOpenAPI validates the token endpoints' answers, and a 403,
// against docs/openapi.yaml.
func TestTokensOpenAPI(t *testing.T) {
	t.Parallel()
	g := tokensGateway(t, StartNATS(t))
	a := newAPIChecker(t, g)
	op := bearer(tokensOperator)
	a.do(401, "GET", "/tokens", nil)
	ctJSON := append(bearer(tokensOperator), "Content-Type", "application/json")
	r := a.do(201, "POST", "/tokens", []byte(`{"name":"oa","prefix":"oa.","rights":["push"]}`), ctJSON...)
	var created struct {
		Token, ID string
	}
	if err := json.Unmarshal(r.Body, &created); err != nil {
		t.Fatal(err)
	}
	a.do(400, "POST", "/tokens", []byte(`{"name":"oa","rights":["fly"]}`), ctJSON...)
	a.do(415, "POST", "/tokens", []byte(`{"name":"oa","rights":["push"]}`), append(op, "Content-Type", "text/plain")...)
	a.do(403, "POST", "/tokens", []byte(`{"name":"oa","rights":["push"]}`), append(ctJSON, "Sec-Fetch-Site", "cross-site")...)
	a.do(200, "GET", "/tokens", nil, op...)
	a.do(200, "GET", "/tokens/"+created.ID, nil, op...)
	a.do(403, "GET", "/tokens", nil, bearer(created.Token)...)
	a.do(403, "DELETE", "/tokens/"+created.ID, nil, bearer(created.Token)...)
	a.do(204, "DELETE", "/tokens/"+created.ID, nil, op...)
	a.do(404, "GET", "/tokens/"+created.ID, nil, op...)
	a.do(404, "DELETE", "/tokens/"+created.ID, nil, op...)
	a.do(401, "GET", "/tokens", nil, bearer(created.Token)...)
}
