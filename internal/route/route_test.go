package route

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/gorilla/mux"
)

// TestUndeclaredFailsLoudly: a route cannot be declared without a need, or
// with one that does not fit its template; Handle panics at once.
func TestUndeclaredFailsLoudly(t *testing.T) {
	t.Parallel()
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, c := range []struct {
		what   string
		tpl    string
		need   Need
		prefix bool
		method []string
	}{
		{"no need", "/x", 0, false, []string{"GET"}},
		{"a right without a scope", "/x", Need(RightPush), false, []string{"GET"}},
		{"a scope without a right", "/x", OnAll(0), false, []string{"GET"}},
		{"an unknown right", "/x", OnAll(1 << 7), false, []string{"GET"}},
		{"an unknown scope", "/x", makeNeed(ScopePublic+1, 0), false, []string{"GET"}},
		{"a queue's right without {name}", "/x/{id}", OnQueue(RightPull), false, []string{"GET"}},
		{"a right with Public", "/x", makeNeed(ScopePublic, RightAdmin), false, []string{"GET"}},
		{"a public route with a variable", "/x/{name}", Public, false, []string{"GET"}},
		{"a public prefix", "/x/", Public, true, []string{"GET"}},
		{"no method", "/x", Authenticated, false, nil},
		{"a bad template", "/x/{name", Authenticated, false, []string{"GET"}},
		{"a route declared twice", "/twice", Authenticated, false, []string{"GET"}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: declared without a panic", c.what)
				}
			}()
			tb := NewTable()
			tb.Handle("/twice", OnAll(RightAdmin), nop, http.MethodPost, http.MethodGet)
			if c.prefix {
				tb.HandlePrefix(c.tpl, c.need, nop, c.method...)
			} else {
				tb.Handle(c.tpl, c.need, nop, c.method...)
			}
		}()
	}
}

// TestMatched: the middleware sees the matched route's template and need,
// and its variables as the client encoded them; unmatched requests reach
// no middleware; public routes are known by their path.
func TestMatched(t *testing.T) {
	t.Parallel()
	tb := NewTable()
	var got []string
	tb.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tpl, need, ok := Matched(r)
			if !ok {
				t.Errorf("%s: no declared route", r.URL)
			}
			got = append(got, tpl+" "+need.String()+" "+Var(r, "name")+" "+Var(r, "id"))
			next.ServeHTTP(w, r)
		})
	})
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	tb.Handle("/m/{name}", OnQueue(RightPush), nop, http.MethodPost)
	tb.Handle("/m/{name}/{id}", OnQueue(RightPull), nop, http.MethodPost)
	tb.Handle("/health", Public, nop, http.MethodGet)
	tb.HandlePrefix("/ui/", OnAll(RightAdmin), nop, http.MethodGet)
	tb.NotFound(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(404) }))
	tb.MethodNotAllowed(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(405) }))

	for _, c := range []struct {
		method, target string
		status         int
	}{
		{"POST", "/m/lmq%2Ffoo", 200},
		{"POST", "/m/a//b/x", 404}, // not cleaned, and "" is no name
		{"POST", "/m/../m/q", 404}, // not cleaned
		{"POST", "/m/%2E%2E/id", 200},
		{"GET", "/m/q", 405},
		{"GET", "/ui/app.js", 200},
		{"GET", "/health", 200},
	} {
		w := httptest.NewRecorder()
		tb.ServeHTTP(w, httptest.NewRequest(c.method, c.target, nil))
		if w.Code != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.target, w.Code, c.status)
		}
	}
	want := []string{
		"/m/{name} push on the queue lmq%2Ffoo ",
		"/m/{name}/{id} pull on the queue %2E%2E id",
		"/ui/ admin on every queue  ",
		"/health public  ",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("middleware saw\n%q\nwant\n%q", got, want)
	}
	if !tb.Public("/health") || tb.Public("/ui/") || tb.Public("/m/q") {
		t.Error("Public is not the public routes' paths")
	}
	for _, rt := range tb.Routes() {
		if !rt.Declared {
			t.Errorf("%+v not declared", rt)
		}
	}
	// The middleware is wrapped around the routes when the table first
	// serves: a route or middleware declared later would be missed.
	for what, late := range map[string]func(){
		"route":      func() { tb.Handle("/late", Authenticated, nop, http.MethodGet) },
		"middleware": func() { tb.Use(func(h http.Handler) http.Handler { return h }) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("a %s declared after serving was accepted", what)
				}
			}()
			late()
		}()
	}
}

// TestFastMatchIsMux: the fast match (fast.go) chooses, for every request,
// the route and variables gorilla/mux chooses, whenever either chooses one
// of the fast routes. The templates are of every kind the gateway
// declares, then one fast.go cannot express and one after it, which must
// be left to mux; the paths are those templates with awkward pieces in
// their variables, and every short sequence of such pieces after a few
// prefixes, each as the client sent it and each with every method.
func TestFastMatchIsMux(t *testing.T) {
	t.Parallel()
	tb := NewTable()
	nop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	admin := OnAll(RightAdmin)
	templates := []struct {
		tpl     string
		prefix  bool
		methods []string
	}{
		{"/messages/{name}", false, []string{"POST"}},
		{"/messages/{name}", false, []string{"GET"}},
		{"/messages/{name}/{id}", false, []string{"POST"}},
		{"/messages", false, []string{"POST", "GET"}},
		{"/queues/{name}", false, []string{"DELETE"}},
		{"/queues/{name}/dead/head", false, []string{"GET"}},
		{"/openapi.yaml", false, []string{"GET", "HEAD"}},
		{"/ui", false, []string{"GET"}},
		{"/ui/api/queues", false, []string{"GET"}},
		{"/ui/", true, []string{"GET", "HEAD"}},
		{"/", false, []string{"GET"}},
		{"/tokens/{id}", false, []string{"GET", "DELETE"}},
		{"/n/{id:[0-9]+}", false, []string{"GET"}}, // not fast: mux's from here on
		{"/after/{name}", false, []string{"GET"}},
	}
	for _, c := range templates {
		if c.prefix {
			tb.HandlePrefix(c.tpl, admin, nop, c.methods...)
		} else {
			tb.Handle(c.tpl, admin, nop, c.methods...)
		}
	}
	tb.build.Do(tb.prepare)
	if len(tb.fast) != len(templates)-2 {
		t.Fatalf("%d fast routes, want %d", len(tb.fast), len(templates)-2)
	}

	pieces := []string{"q", "", "/", "%2F", "..", ".", "é", "%C3%A9", "%20", "+", "%25", ";", "{name}", "m%65", "~", "a:b"}
	var paths []string
	for _, c := range templates {
		for _, p := range pieces {
			for _, p2 := range []string{"x", p} {
				path := strings.NewReplacer("{name}", p, "{id:[0-9]+}", p2, "{id}", p2).Replace(c.tpl)
				paths = append(paths, path, path+"/", path+"x")
			}
		}
	}
	var grow func(p string, n int)
	grow = func(p string, n int) {
		paths = append(paths, p)
		if n > 0 {
			for _, s := range pieces {
				grow(p+s, n-1)
			}
		}
	}
	for _, prefix := range []string{"/messages", "/ui", "/m%65ssages", "/queues/q"} {
		grow(prefix, 2)
	}

	fastTaken := 0
	for _, p := range paths {
		u, err := url.ParseRequestURI(p)
		if err != nil {
			continue // net/http refuses the request line before any handler
		}
		for _, method := range []string{"GET", "POST", "HEAD", "DELETE", "PUT", "post"} {
			r := &http.Request{Method: method, URL: u, RequestURI: p}
			m := &match{}
			d := tb.fastMatch(r, m)
			var mm mux.RouteMatch
			tb.mux.Match(r, &mm)
			md, _ := mm.Handler.(*declared)
			if mm.MatchErr != nil {
				md = nil
			}
			if d == nil && (md == nil || !slices.Contains(tb.fast, md)) {
				continue // mux's alone, as it should be
			}
			fastTaken++
			if d != md {
				t.Errorf("%s %q (escaped %q): fast %v, mux %v", method, p, u.EscapedPath(), tplOf(d), tplOf(md))
				continue
			}
			vars := map[string]string{}
			for i, name := range d.vars {
				vars[name] = m.vals[i]
			}
			if !maps.Equal(vars, mm.Vars) {
				t.Errorf("%s %q: fast %s %v, mux %v", method, p, d.tpl, vars, mm.Vars)
			}
		}
	}
	if fastTaken < 500 {
		t.Errorf("the fast routes took only %d requests of %d paths", fastTaken, len(paths))
	}
}

func tplOf(d *declared) string {
	if d == nil {
		return "none"
	}
	return d.tpl + " " + strings.Join(d.methods, ",")
}
