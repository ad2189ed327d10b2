// Package route is the HTTP server's route table: gorilla/mux, set up for
// LMQ's queue names, on which every route of the server (the LMQ API of
// package httpapi, the operations endpoints of package ops, the console) is
// declared once, together with what a request needs to use it (Need: a
// Right on some queues). The authorization (package auth) reads the matched
// route's Need, so there is no second list of templates to keep in step, and
// a route cannot be declared without one: Handle panics, as net/http's
// ServeMux does on a bad pattern, so that the mistake shows at the first
// start of any test.
// Requests are routed as mux routes them; for the plain templates the
// gateway uses, the same choice is found faster from the same declarations
// (fast.go).
package route

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/gorilla/mux"
)

// Table is the server's route table. Create it with NewTable, declare
// routes with Handle, HandleFunc and HandlePrefix and middleware with Use,
// then serve it; nothing can be declared once it has served.
type Table struct {
	mux *mux.Router
	// routes in the order declared, which is the order they are tried.
	routes []*declared
	// fast are the leading routes of routes that fast.go matches itself.
	fast []*declared
	// public are the paths of the ScopePublic routes.
	public map[string]bool
	// declared are the routes so far, "METHOD template" (a prefix ends in
	// "*"): a second declaration would never be reached, and its need
	// never read.
	declared                   map[string]bool
	mws                        []func(http.Handler) http.Handler
	notFound, methodNotAllowed http.Handler

	// build wraps every route's handler in the middleware, once, when the
	// table first serves (Use may come after the routes it applies to).
	build sync.Once
	built bool
}

// NewTable returns an empty table.
func NewTable() *Table {
	r := mux.NewRouter()
	// Queue names arrive percent-encoded ("lmq%2Ffoo" is the queue
	// "lmq/foo"): match on the encoded path, so that the variables are
	// still encoded and a %2F does not split a name into two segments; and
	// never "clean" a path, which would redirect names holding "//" or "..".
	r.UseEncodedPath()
	r.SkipClean(true)
	return &Table{
		mux:              r,
		public:           map[string]bool{},
		declared:         map[string]bool{},
		notFound:         http.NotFoundHandler(),
		methodNotAllowed: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusMethodNotAllowed) }),
	}
}

// declared is a route as the table holds it.
type declared struct {
	h       http.Handler
	need    Need
	tpl     string
	prefix  bool
	methods []string // upper case, as mux compares them
	// vars are the template's variable names in order; segs its segments
	// for the fast match (nil when fast.go cannot match it).
	vars []string
	segs []segment
	// chain is h inside the middleware.
	chain http.Handler
}

// ServeHTTP serves the route (inside the middleware) for a request that
// Table.ServeHTTP matched to it.
func (d *declared) ServeHTTP(w http.ResponseWriter, r *http.Request) { d.chain.ServeHTTP(w, r) }

// Handle declares the route tpl (a gorilla/mux template: literal segments
// and {vars}, each one segment of the escaped path) for the requests of
// methods, served by h, needing need. Routes are tried in the order
// declared. It panics when need is not a valid declaration for tpl, no
// method is given, the route was declared before or the table has served.
func (t *Table) Handle(tpl string, need Need, h http.Handler, methods ...string) {
	t.add(tpl, false, need, h, methods)
}

// HandleFunc is Handle of a function.
func (t *Table) HandleFunc(tpl string, need Need, f http.HandlerFunc, methods ...string) {
	t.add(tpl, false, need, f, methods)
}

// HandlePrefix is Handle for every path beginning with prefix.
func (t *Table) HandlePrefix(prefix string, need Need, h http.Handler, methods ...string) {
	t.add(prefix, true, need, h, methods)
}

func (t *Table) add(tpl string, prefix bool, need Need, h http.Handler, methods []string) {
	if t.built {
		panic(fmt.Sprintf("route %s declared after the table served", tpl))
	}
	if err := need.check(tpl, prefix); err != nil {
		panic(fmt.Sprintf("route %s %s: %v", strings.Join(methods, ","), tpl, err))
	}
	if len(methods) == 0 {
		// A need is declared for the methods a route names; one that took
		// every method would give DELETE what was declared for GET.
		panic(fmt.Sprintf("route %s: no methods", tpl))
	}
	d := &declared{h: h, need: need, tpl: tpl, prefix: prefix}
	for _, m := range methods {
		m = strings.ToUpper(m)
		key := m + " " + tpl
		if prefix {
			key += "*"
		}
		if t.declared[key] {
			panic(fmt.Sprintf("route %s declared twice", key))
		}
		t.declared[key] = true
		d.methods = append(d.methods, m)
	}
	rt := t.mux.NewRoute()
	if prefix {
		rt.PathPrefix(tpl)
	} else {
		rt.Path(tpl)
	}
	rt.Methods(methods...).Handler(d)
	if err := rt.GetError(); err != nil {
		panic(fmt.Sprintf("route %s %s: %v", strings.Join(methods, ","), tpl, err))
	}
	d.vars, _ = rt.GetVarNames()
	d.segs = segments(tpl, prefix)
	t.routes = append(t.routes, d)
	if need.Scope() == ScopePublic {
		t.public[tpl] = true
	}
}

// Use adds a middleware that runs around the handler of every route, in
// the order added (not around NotFound and MethodNotAllowed).
func (t *Table) Use(mw func(http.Handler) http.Handler) {
	if t.built {
		panic("middleware added after the table served")
	}
	t.mws = append(t.mws, mw)
}

// NotFound sets the answer to a request no route's path matches.
func (t *Table) NotFound(h http.Handler) { t.notFound = h }

// MethodNotAllowed sets the answer to a request whose path a route matches
// but none for its method.
func (t *Table) MethodNotAllowed(h http.Handler) { t.methodNotAllowed = h }

// matchKey carries the route that matched a request (Matched, Var).
type matchKey struct{}

// match is the route that matched a request and its variables: by index
// in d.vars (the fast match), or mux's.
type match struct {
	d    *declared
	vals [maxFastVars]string
	vars map[string]string
}

// ServeHTTP routes r to its route's handler inside the middleware. The
// route is the one gorilla/mux chooses: fast.go finds it for the routes it
// can (every route of the gateway), and mux.Router.Match for the rest and
// for the requests none of those takes (404 and 405 included).
func (t *Table) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t.build.Do(t.prepare)
	m := &match{}
	m.d = t.fastMatch(r, m)
	if m.d == nil {
		var mm mux.RouteMatch
		t.mux.Match(r, &mm)
		d, ok := mm.Handler.(*declared)
		switch {
		case ok && mm.MatchErr == nil:
			m.d, m.vars = d, mm.Vars
		case errors.Is(mm.MatchErr, mux.ErrMethodMismatch):
			t.methodNotAllowed.ServeHTTP(w, r)
			return
		default:
			t.notFound.ServeHTTP(w, r)
			return
		}
	}
	m.d.chain.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), matchKey{}, m)))
}

// prepare wraps the middleware around every route's handler (once, rather
// than for every request as mux.Router.ServeHTTP does) and picks the fast
// routes: those ahead of the first route fast.go cannot match.
func (t *Table) prepare() {
	for _, d := range t.routes {
		d.chain = d.h
		for i := len(t.mws) - 1; i >= 0; i-- {
			d.chain = t.mws[i](d.chain)
		}
	}
	t.fast = t.routes
	for i, d := range t.routes {
		if d.segs == nil {
			t.fast = t.routes[:i]
			break
		}
	}
	t.built = true
}

// Public reports whether path (r.URL.Path) is that of a route declared
// Public: the authentication ahead of the router lets such a request
// through without a credential.
func (t *Table) Public(path string) bool { return t.public[path] }

// Route is a declared route, as Routes lists it.
type Route struct {
	Template string
	Prefix   bool
	Methods  []string
	Need     Need
	// Declared is false for a route that reached the router without
	// Handle, which cannot happen through this package's API.
	Declared bool
}

// Routes lists the table's routes in the order they are tried, as the
// router holds them.
func (t *Table) Routes() []Route {
	var out []Route
	_ = t.mux.Walk(func(rt *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := rt.GetPathTemplate()
		if err != nil {
			tpl = "" // a route without a path: no template to show
		}
		methods, _ := rt.GetMethods()
		d, ok := rt.GetHandler().(*declared)
		if !ok {
			d = &declared{}
		}
		out = append(out, Route{
			Template: tpl,
			Prefix:   d.prefix,
			Methods:  methods,
			Need:     d.need,
			Declared: ok && d.need.check(tpl, d.prefix) == nil,
		})
		return nil
	})
	return out
}

// Matched returns the template and need of the route that matched r (in
// the middleware added with Use and in the route's handler); ok is false
// for a request no route matched.
func Matched(r *http.Request) (tpl string, need Need, ok bool) {
	m, ok := r.Context().Value(matchKey{}).(*match)
	if !ok {
		return "", 0, false
	}
	return m.d.tpl, m.d.need, true
}

// Var is the path variable key of the route that matched r, still
// percent-encoded as the client sent it (the router matches the escaped
// path): "lmq%2Ffoo" for the queue "lmq/foo". "" when there is none.
func Var(r *http.Request, key string) string {
	m, _ := r.Context().Value(matchKey{}).(*match)
	switch {
	case m == nil:
		return ""
	case m.vars != nil:
		return m.vars[key]
	}
	for i, name := range m.d.vars {
		if name == key {
			return m.vals[i]
		}
	}
	return ""
}
