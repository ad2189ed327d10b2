package httpapi

import (
	"bufio"
	"context"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/testnats"
	"github.com/lmq-gateway/lmq-gateway/ops"
)

// TestFastRouteAgreesWithMux: whatever request the fast path takes, the
// router would have routed to the same route (template) with the same
// variables. Paths are every short sequence of awkward pieces after each
// base, as the client sent them and as rawPath leaves them.
func TestFastRouteAgreesWithMux(t *testing.T) {
	t.Parallel()
	r := mux.NewRouter().UseEncodedPath().SkipClean(true)
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	// The routes of New, in its order, with their pre-check.
	route := func(tpl string, methods ...string) {
		r.NewRoute().MatcherFunc(mayMatch(tpl)).Path(tpl).Handler(nop).Methods(methods...)
	}
	for _, base := range []string{"/messages", "/msgs"} {
		route(base, http.MethodPost)
		route(base, http.MethodGet)
		route(base+"/{name}", http.MethodPost)
		route(base+"/{name}", http.MethodGet)
		route(base+"/{name}/{id}", http.MethodPost)
	}
	route("/queues/{name}", http.MethodDelete)
	route("/queues/{name}/dead", http.MethodGet)
	route("/props/{name}", http.MethodGet)
	f := newFastRouter(r)
	for _, rt := range slices.Concat(f.push[:], f.pull[:], f.reply[:]) {
		if rt.h == nil {
			t.Fatalf("the router did not confirm a fast route: %+v", f)
		}
	}

	pieces := []string{"q", "/", "%2F", "..", ".", "é", "%C3%A9", "%20", "+", "%25", ";", "%", "%zz", "m%65", "\x7f", "~"}
	var paths []string
	var grow func(p string, n int)
	grow = func(p string, n int) {
		paths = append(paths, p)
		if n == 0 {
			return
		}
		for _, s := range pieces {
			grow(p+s, n-1)
		}
	}
	for _, prefix := range []string{"/messages", "/msgs", "/m%65ssages", "/messagesx", "/queues"} {
		grow(prefix, 3)
	}
	paths = append(paths, "/messages/"+strings.Repeat("a", 1024), "/msgs/"+strings.Repeat("%41", 1024)+"/x")

	taken := 0
	for _, p := range paths {
		u, err := url.ParseRequestURI(p)
		if err != nil {
			continue // net/http refuses the request line before any handler
		}
		for _, uu := range []*url.URL{u, withRawPath(u, p)} {
			for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodHead, http.MethodPut, "post"} {
				req := &http.Request{Method: method, URL: uu, RequestURI: p}
				rt := f.match(req)
				if rt == nil {
					continue
				}
				req.Pattern = rt.tpl // as ServeHTTP does
				name, id := pathVar(req, "name"), pathVar(req, "id")
				taken++
				var m mux.RouteMatch
				if !r.Match(req, &m) || m.MatchErr != nil || m.Route == nil {
					t.Errorf("%s %q (RawPath %q): fast route %s, the router matches nothing", method, p, uu.RawPath, rt.tpl)
					continue
				}
				tpl, _ := m.Route.GetPathTemplate()
				want := map[string]string{"name": name}
				if id != "" {
					want["id"] = id
				}
				if tpl != rt.tpl || !maps.Equal(m.Vars, want) {
					t.Errorf("%s %q (RawPath %q): fast route %s %v, the router's %s %v", method, p, uu.RawPath, rt.tpl, want, tpl, m.Vars)
				}
			}
		}
	}
	if taken < 1000 {
		t.Errorf("the fast path took only %d requests of %d paths", taken, len(paths))
	}
}

// opsCore is the fake core seen by package ops.
type opsCore struct{ *fakeCore }

func (opsCore) InFlight() int                    { return 0 }
func (opsCore) Closing() <-chan struct{}         { return nil }
func (opsCore) ProbeStore(context.Context) error { return nil }
func (opsCore) StoreFailure() error              { return nil }
func (opsCore) StoreFailures() uint64            { return 0 }
func (opsCore) WaitingPulls() int                { return 0 }
func (opsCore) Peers() []string                  { return nil }

// routedServer is the API as the gateway serves it (ops' middleware and
// routes, timeouts, connection bound deliveries), with or without the fast
// path. It counts the requests that reached a route's middleware without
// mux (through the fast path) in *unrouted.
func routedServer(t *testing.T, fast bool, opt ops.Options, unrouted *atomic.Int64) *httptest.Server {
	t.Helper()
	core := newFakeCore()
	opt.Logger = quiet()
	o := ops.New(opsCore{core}, ops.NewStats(ops.StatsOptions{}), opt)
	bound := NewConnBound(core, quiet())
	srv := httptest.NewUnstartedServer(newAPI(core, Options{
		Logger: quiet(),
		Mount: func(r *mux.Router) {
			o.Mount(r)
			r.Use(func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if mux.CurrentRoute(r) == nil {
						unrouted.Add(1)
					}
					next.ServeHTTP(w, r)
				})
			})
		},
		Middleware: o.Middleware,
		Timeouts:   Timeouts{BodyIdle: time.Minute, MinRate: 1000, Write: time.Minute},
		ConnBound:  bound,
	}, fast))
	srv.Config.ConnContext = ConnContext
	srv.Config.ConnState = bound.ConnState
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
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

// requestCounts is the request counters of /metrics (method, route, code).
//
// Its own reads are left out: the middleware records a request after its
// answer is written, so the last one may not be counted yet.
func requestCounts(t *testing.T, srv *httptest.Server, hdr ...string) []string {
	t.Helper()
	_, body := rawDo(t, srv, http.MethodGet, ops.PathMetrics, "", hdr...)
	var out []string
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "lmq_http_request_duration_seconds_count{") && !strings.Contains(line, `route="/metrics"`) {
			out = append(out, line)
		}
	}
	return out
}

// sameCounts reads both servers' request counts until they agree, for as
// long as a request's late recording could take (a bound reached only on
// failure), and returns the last reads.
func sameCounts(t *testing.T, fast, slow *httptest.Server, hdr ...string) (f, s []string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		f, s = requestCounts(t, fast, hdr...), requestCounts(t, slow, hdr...)
		if slices.Equal(f, s) || time.Now().After(deadline) {
			return f, s
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type routeCase struct {
	method, target, body string
	hdr                  []string
}

// compareServers sends each request to both servers and checks that they
// answer the same (status, body, the headers a client reads) and count it
// under the same route label. "{id}" in a target is the last delivery id
// the same server answered.
func compareServers(t *testing.T, fast, slow *httptest.Server, cases []routeCase, metricsHdr ...string) {
	t.Helper()
	ids := map[*httptest.Server]string{}
	for _, c := range cases {
		type result struct {
			status int
			body   string
			header []string
		}
		var got [2]result
		for i, srv := range []*httptest.Server{fast, slow} {
			target := strings.ReplaceAll(c.target, "{id}", ids[srv])
			resp, body := rawDo(t, srv, c.method, target, c.body, c.hdr...)
			if id := resp.Header.Get("X-Lmq-Message-Id"); id != "" {
				ids[srv] = id
			}
			var h []string
			for _, k := range []string{"Content-Type", "Content-Length", "Allow", "Location", "Retry-After", "WWW-Authenticate",
				"X-Lmq-Message-Id", "X-Lmq-Queue-Name", "X-Lmq-Message-Type", "X-Lmq-Retry-Remaining", "X-Lmq-Delivery-State"} {
				h = append(h, k+": "+strings.Join(resp.Header.Values(k), ","))
			}
			got[i] = result{resp.StatusCode, body, h}
		}
		what := c.method + " " + c.target
		if got[0].status != got[1].status || got[0].body != got[1].body {
			t.Errorf("%s: fast path %d %q, router %d %q", what, got[0].status, got[0].body, got[1].status, got[1].body)
		}
		if !slices.Equal(got[0].header, got[1].header) {
			t.Errorf("%s: fast path headers %q, router %q", what, got[0].header, got[1].header)
		}
		if f, s := sameCounts(t, fast, slow, metricsHdr...); !slices.Equal(f, s) {
			t.Errorf("%s: fast path request counts\n%s\nrouter\n%s", what, strings.Join(f, "\n"), strings.Join(s, "\n"))
		}
	}
}

// TestFastRouteSameAnswers: the same requests, tricky ones included, get
// the same answers and route labels with the fast path as through the
// router alone, over real HTTP with ops' middleware.
func TestFastRouteSameAnswers(t *testing.T) {
	t.Parallel()
	var viaFast, viaMux atomic.Int64
	fast, slow := routedServer(t, true, ops.Options{}, &viaFast), routedServer(t, false, ops.Options{}, &viaMux)
	long := strings.Repeat("a", 1024)
	var cases []routeCase
	add := func(method, target, body string, hdr ...string) {
		cases = append(cases, routeCase{method, target, body, hdr})
	}
	for _, base := range []string{"/messages", "/msgs"} {
		add("POST", base+"/q", "hello", "Content-Type", "text/plain")
		add("GET", base+"/q?t=0", "")
		add("POST", base+"/q/{id}?reply=nack", "")
		add("GET", base+"/q?t=0&cf=msgpack", "")
		add("POST", base+"/q/{id}?reply=ack", "")
		add("POST", base+"/q/{id}?reply=ack", "") // acked already: 404
		add("POST", base+"/q/{id}?reply=bogus", "")
		add("POST", base+"/q/{id}", "")
		add("GET", base+"/q?t=0", "") // empty: 204
	}
	for _, name := range []string{
		"lmq%2Ffoo", "%2F", "%2F%2F", "a+b", "sp%20ace", "%252F", "%E3%81%82", "日本語", "x%2Fñ", "é+é",
		"..", ".", "...", "%2E%2E", "q;x", "q%3Bx", "~q", "a:b@c", "%zz", "q%", "%00", "%7F",
		long, long + "b", strings.Repeat("%41", 1024), strings.Repeat("é", 512),
	} {
		add("POST", "/messages/"+name, "m-"+name)
		add("GET", "/messages/"+name+"?t=0", "")
		add("POST", "/messages/"+name+"/{id}?reply=ack", "")
		add("POST", "/msgs/"+name+"/%2E%2E?reply=ack", "")
	}
	for _, target := range []string{
		"/messages", "/messages/", "/messages//", "/messages//x", "/messages/q/", "/messages/q//", "/messages/q/id/",
		"/messages/q/id/more", "/messages/../queues", "/messages/q/..", "/messages/./q", "/messagesq", "/msgs",
		"/m%65ssages/q", "/messages%2Fq", "/MESSAGES/q", "/msgs/q/%2F", "/msgs/%2F/%2F",
	} {
		for _, method := range []string{"GET", "POST"} {
			add(method, target, "")
			add(method, target+"?t=0&reply=ack", "")
		}
	}
	for _, method := range []string{"GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "post", "Get", "BREW"} {
		add(method, "/messages/q?t=0", "")
		add(method, "/msgs/q/id", "")
	}
	add("POST", "http://x/messages/abs", "absolute-form")
	add("GET", "http://x/messages/abs?t=0", "")
	add("POST", "/messages/q?delay=abc", "x")
	add("POST", "/messages/q?delay=1&ttl=2&priority=3", "x")
	add("POST", "/messages/q?batch=1", "x")
	add("GET", "/messages/q?t=%zz", "")
	add("GET", "/messages/q?t=0;x=1", "")
	add("GET", "/messages/q?%", "")
	add("GET", "/messages/q?t=0#frag", "")
	add("GET", "/messages/q?t=0", "", "X-Lmq-Release-On-Disconnect", "yes")
	add("POST", "/messages/q/{id}?reply=ext", "")
	add("POST", "/messages/q/{id}?reply=ack&x=%", "")
	add("GET", "/messages?qre=.*&t=0", "")
	add("POST", "/msgs?qre=q", "all")
	add("GET", "/queues", "")
	add("GET", "/stats", "")
	compareServers(t, fast, slow, cases)
	if viaFast.Load() < 100 || viaMux.Load() != 0 {
		t.Errorf("requests served without mux: %d with the fast path, %d without", viaFast.Load(), viaMux.Load())
	}
}

// TestFastRouteTokenScope: token authorization (ops) sees the fast path's
// route and queue name as the router's: in scope, out of scope, encoded.
func TestFastRouteTokenScope(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	nc := testnats.Connect(t, ns, "httpapi")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := gateway.New(ctx, nc, gateway.Config{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	ts, err := g.OpenTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := ts.CreateToken(ctx, gateway.TokenSpec{Name: "n", Prefix: "a", Rights: []string{"push", "pull"}})
	if err != nil {
		t.Fatal(err)
	}
	pushOnly, _, err := ts.CreateToken(ctx, gateway.TokenSpec{Name: "p", Prefix: "a", Rights: []string{"push"}})
	if err != nil {
		t.Fatal(err)
	}
	opt := ops.Options{Tokens: ts, Auth: ops.Auth{BearerToken: "op"}}
	var viaFast, viaMux atomic.Int64
	fast, slow := routedServer(t, true, opt, &viaFast), routedServer(t, false, opt, &viaMux)
	bearer := func(s string) []string { return []string{"Authorization", "Bearer " + s} }
	var cases []routeCase
	for _, who := range []string{tok, pushOnly, "op", "wrong"} {
		for _, name := range []string{"a1", "b1", "a%2Fx", "b%2Fa", "%61b", "ä", "%zz"} {
			cases = append(cases,
				routeCase{"POST", "/messages/" + name, "x", bearer(who)},
				routeCase{"GET", "/msgs/" + name + "?t=0", "", bearer(who)},
				routeCase{"POST", "/messages/" + name + "/{id}?reply=ack", "", bearer(who)},
				routeCase{"POST", "/messages/" + name + "?token=" + who, "y", nil},
			)
		}
	}
	compareServers(t, fast, slow, cases, bearer("op")...)
	if viaFast.Load() < 10 || viaMux.Load() != 0 {
		t.Errorf("requests served without mux: %d with the fast path, %d without", viaFast.Load(), viaMux.Load())
	}
}
