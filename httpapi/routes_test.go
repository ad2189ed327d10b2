package httpapi

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/console"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/fakecore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testcore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/internal/route"
	"github.com/lmq-gateway/lmq-gateway/ops"
)

// opsCoreOf is the fake core f as package ops sees it: its Queues, its
// Inspect with no deliveries in flight and no pulls waiting, and a gateway
// that is up, alone and stores.
func opsCoreOf(f *fakecore.Core) ops.Core {
	return ops.Core{Queues: f.Queues(), Inspect: opsInspect{f.Inspect()}, Gateway: opsGateway{}}
}

type opsInspect struct{ *fakecore.Inspect }

func (opsInspect) InFlight() int                   { return 0 }
func (opsInspect) InFlightByQueue() map[string]int { return nil }
func (opsInspect) WaitingPulls() int               { return 0 }

type opsGateway struct{}

func (opsGateway) Closing() <-chan struct{}         { return nil }
func (opsGateway) ProbeStore(context.Context) error { return nil }
func (opsGateway) StoreFailure() error              { return nil }
func (opsGateway) StoreFailures() uint64            { return 0 }
func (opsGateway) Peers() []string                  { return nil }

// fullAPI is the HTTP API as the server assembles it, with every route
// mounted (ops' with tokens on, the console's) over the fake core, and its
// route table.
type fullAPI struct {
	srv    *httptest.Server
	table  *route.Table
	tokens *auth.Store
}

// startFullAPI serves the whole API. The tokens are real (a core on an
// embedded NATS server holds them; the console reads that core too); the
// messages go to the fake core.
func startFullAPI(t *testing.T) *fullAPI {
	t.Helper()
	ns := testnats.Start(t)
	nc := testnats.Connect(t, ns, "httpapi")
	g := testcore.New(t, nc, gateway.Config{Logger: quiet()})
	ts, err := auth.Open(t.Context(), g, nil)
	if err != nil {
		t.Fatal(err)
	}
	core := fakecore.New()
	o := ops.New(opsCoreOf(core), ops.NewStats(ops.StatsOptions{}), ops.Options{Logger: quiet(), Tokens: ts, Auth: auth.Credential{BearerToken: "op"}})
	ui, err := console.New(console.CoreOf(g), o, console.Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	bound := NewConnBound(coreOf(core), quiet())
	api := &fullAPI{tokens: ts}
	srv := httptest.NewUnstartedServer(New(coreOf(core), Options{
		Logger: quiet(),
		Mount: func(t *route.Table) {
			ui.Mount(t)
			o.Mount(t)
			api.table = t
		},
		Middleware: o.Middleware,
		Timeouts:   Timeouts{BodyIdle: time.Minute, MinRate: 1000, Write: time.Minute},
		ConnBound:  bound,
	}))
	srv.Config.ConnContext = ConnContext
	srv.Config.ConnState = bound.ConnState
	srv.Start()
	t.Cleanup(srv.Close)
	api.srv = srv
	return api
}

// TestEveryRouteDeclaresItsNeed: every route of the assembled API was
// declared with what a token needs to use it (route.Table refuses a route
// without one; this checks nothing reached the router another way), and
// the needs are the documented ones (docs/api.md, "Tokens").
func TestEveryRouteDeclaresItsNeed(t *testing.T) {
	t.Parallel()
	api := startFullAPI(t)
	routes := api.table.Routes()
	if len(routes) < 40 {
		t.Fatalf("only %d routes: %+v", len(routes), routes)
	}
	need := map[string]route.Need{}
	for _, rt := range routes {
		if !rt.Declared {
			t.Errorf("route %v %s declares no need", rt.Methods, rt.Template)
		}
		for _, m := range rt.Methods {
			need[m+" "+rt.Template] = rt.Need
		}
	}
	push, pull, admin := route.RightPush, route.RightPull, route.RightAdmin
	for route, want := range map[string]route.Need{
		"POST /messages/{name}":            route.OnQueue(push),
		"POST /msgs/{name}":                route.OnQueue(push),
		"GET /messages/{name}":             route.OnQueue(pull),
		"POST /messages/{name}/{id}":       route.OnQueue(pull),
		"POST /messages":                   route.Listed(push),
		"GET /msgs":                        route.Listed(pull),
		"PATCH /properties/{name}":         route.OnQueue(admin),
		"GET /props/{name}":                route.OnQueue(admin),
		"PUT /properties":                  route.OnAll(admin),
		"DELETE /queues/{name}":            route.OnQueue(admin),
		"GET /queues/{name}":               route.OnQueue(route.AnyRight),
		"GET /queues":                      route.Listed(route.AnyRight),
		"GET /stats":                       route.Listed(route.AnyRight),
		"GET /queues/{name}/dead/head":     route.OnQueue(admin),
		"POST /queues/{name}/dead/respawn": route.OnQueue(admin),
		"DELETE /queues/{name}/messages":   route.OnQueue(admin),
		"GET /metrics":                     route.OnAll(admin),
		"POST /tokens":                     route.OnAll(admin),
		"DELETE /tokens/{id}":              route.OnAll(admin),
		"GET /ui/api/queues":               route.OnAll(admin),
		"GET /ui/":                         route.OnAll(admin),
		"GET /openapi.yaml":                route.Authenticated,
		"GET /healthz":                     route.Public,
		"HEAD /readyz":                     route.Public,
	} {
		got, ok := need[route]
		if !ok {
			t.Errorf("%s: no such route", route)
		} else if got != want {
			t.Errorf("%s needs %s, want %s", route, got, want)
		}
	}
	// A queue's waiting messages by id: admin, as its dead letters.
	for _, rt := range []string{"GET /queues/{name}/messages", "DELETE /queues/{name}/messages/{id}"} {
		if got, ok := need[rt]; !ok || got != route.OnQueue(admin) {
			t.Errorf("%s needs %s (declared %v), want %s", rt, got, ok, route.OnQueue(admin))
		}
	}
}

// rawDo sends one request with its request line as given (bytes unencoded,
// no cleaning) and returns the answer.
func rawDo(t *testing.T, srv *httptest.Server, method, target, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := method + " " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	for i := 0; i+1 < len(hdr); i += 2 {
		req += hdr[i] + ": " + hdr[i+1] + "\r\n"
	}
	if body != "" || method == http.MethodPost {
		req += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n"
	}
	req += "\r\n" + body
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading answer: %v", method, target, err)
	}
	return resp, string(b)
}

// TestTokenScopeOfQueueRoutes: the queue a token is checked against is
// the route's {name} decoded, as the handler decodes it (percent-encoded,
// raw UTF-8, encoded "/"), and a request is refused 403 before its handler
// runs when the token lacks the route's right on it.
func TestTokenScopeOfQueueRoutes(t *testing.T) {
	t.Parallel()
	api := startFullAPI(t)
	ctx := context.Background()
	pushPull, _, err := api.tokens.CreateToken(ctx, auth.TokenSpec{Name: "n", Prefix: "a", Rights: []string{"push", "pull"}})
	if err != nil {
		t.Fatal(err)
	}
	pushOnly, _, err := api.tokens.CreateToken(ctx, auth.TokenSpec{Name: "p", Prefix: "a", Rights: []string{"push"}})
	if err != nil {
		t.Fatal(err)
	}
	bearer := func(s string) []string { return []string{"Authorization", "Bearer " + s} }
	for _, c := range []struct {
		name    string // as sent in the path
		inScope bool   // decoded, it begins with "a"
		valid   bool   // it is a valid escaped path
	}{
		{"a1", true, true},
		{"b1", false, true},
		{"a%2Fx", true, true},
		{"b%2Fa", false, true},
		{"%61b", true, true},
		{"ä", false, true},
		{"%E3%81%82", false, true},
		{"%zz", false, false},
	} {
		for _, who := range []string{pushPull, pushOnly, "op", "wrong"} {
			want := func(right bool) int {
				switch {
				case !c.valid:
					// net/http refuses the request line.
					return http.StatusBadRequest
				case who == "wrong":
					return http.StatusUnauthorized
				case who != "op" && (!c.inScope || !right):
					return http.StatusForbidden
				}
				return 0 // served: whatever the handler answers
			}
			canPull := who != pushOnly
			// The operator's credential is a header only: as a query
			// parameter it is an unknown token.
			queryWant := want(true)
			if who == "op" && c.valid {
				queryWant = http.StatusUnauthorized
			}
			for _, rq := range []struct {
				method, target, body string
				hdr                  []string
				want                 int
			}{
				{"POST", "/messages/" + c.name, "x", bearer(who), want(true)},
				{"POST", "/msgs/" + c.name + "?token=" + who, "y", nil, queryWant},
				{"GET", "/msgs/" + c.name + "?t=0", "", bearer(who), want(canPull)},
				{"POST", "/messages/" + c.name + "/00000000-0000-4000-8000-000000000001?reply=ack", "", bearer(who), want(canPull)},
				{"DELETE", "/queues/" + c.name, "", bearer(who), want(false)},
			} {
				resp, body := rawDo(t, api.srv, rq.method, rq.target, rq.body, rq.hdr...)
				refused := []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusBadRequest}
				switch {
				case rq.want != 0 && resp.StatusCode != rq.want:
					t.Errorf("%s %s as %q: %d %q, want %d", rq.method, rq.target, who, resp.StatusCode, body, rq.want)
				case rq.want == 0 && slices.Contains(refused, resp.StatusCode):
					t.Errorf("%s %s as %q: refused %d %q", rq.method, rq.target, who, resp.StatusCode, body)
				case resp.StatusCode == http.StatusForbidden && !strings.HasPrefix(body, "token lacks "):
					t.Errorf("%s %s as %q: 403 %q", rq.method, rq.target, who, body)
				}
			}
		}
	}
}
