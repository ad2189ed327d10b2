package httpapi

import (
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/lmq-gateway/lmq-gateway/internal/routevar"
)

// fastRouter serves LMQ's three hot routes (push, pull and reply, under
// /messages and /msgs) without gorilla/mux, whose route loop, regular
// expressions, variables map and two request copies (vars, route) cost
// several microseconds per message, and hands every other request to the
// router unchanged.
//
// It takes a request only when the router would certainly have chosen the
// same route with the same variables: the same method (exactly, as mux
// compares it: HEAD is not GET), and an escaped path (what the router
// matches on, UseEncodedPath) of the template's shape, each variable one or
// more plain printable ASCII bytes other than "/". That is the route's
// expression ("^/messages/(?P<v0>[^/]+)$", …) on a narrower alphabet;
// anything else, an odd byte included, goes to the router, which decides as
// before. No route ahead of these in the router can take such a path (the
// routes before them are /messages and /msgs themselves, and for /msgs
// those of /messages), and none after them is tried by mux once one
// matched; newFastRouter checks with the router which route it picks.
//
// The handler run is the route's own with the router's middleware around
// it (labels and authorization from Mount, strict query parsing), as mux
// builds it: asked of the router itself once, at start, rather than
// rebuilt for every request as mux does. Instead of mux's context values
// the request carries its route's template in Pattern, set in place as
// net/http's ServeMux sets it (no copy of the request). Package ops reads
// it for metrics labels and token authorization. The variables are not
// stored (SetPathValue would allocate a map per request): they are the
// escaped path's segments in the places of "{name}" and "{id}" in the
// template, which is what mux extracts for such a path (pathVar).
type fastRouter struct {
	next http.Handler // the router: every request not taken here
	// Indexed by base (0 /messages, 1 /msgs); a nil handler is a route the
	// router did not confirm, left to it.
	push, pull, reply [2]fastRoute
}

type fastRoute struct {
	tpl string
	h   http.Handler
}

// The path prefixes of the routes fastRouter serves, by index.
const (
	fastBase0 = "/messages"
	fastBase1 = "/msgs"
)

// newFastRouter asks r, once, for the handler (with middleware) and template
// of each fast route, with a request of that route's shape.
func newFastRouter(r *mux.Router) *fastRouter {
	f := &fastRouter{next: r}
	resolve := func(method, path, tpl string) fastRoute {
		req, err := http.NewRequest(method, path, nil)
		if err != nil {
			return fastRoute{}
		}
		var m mux.RouteMatch
		if !r.Match(req, &m) || m.MatchErr != nil || m.Route == nil || m.Handler == nil {
			return fastRoute{}
		}
		if got, err := m.Route.GetPathTemplate(); err != nil || got != tpl {
			return fastRoute{}
		}
		return fastRoute{tpl: tpl, h: m.Handler}
	}
	for i, base := range [2]string{fastBase0, fastBase1} {
		f.push[i] = resolve(http.MethodPost, base+"/q", base+"/{name}")
		f.pull[i] = resolve(http.MethodGet, base+"/q", base+"/{name}")
		f.reply[i] = resolve(http.MethodPost, base+"/q/id", base+"/{name}/{id}")
	}
	return f
}

func (f *fastRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt := f.match(r)
	if rt == nil {
		f.next.ServeHTTP(w, r)
		return
	}
	// In place, as ServeMux does: no copy of the request.
	r.Pattern = rt.tpl
	rt.h.ServeHTTP(w, r)
}

// match returns the fast route of r, or nil.
func (f *fastRouter) match(r *http.Request) *fastRoute {
	var post bool
	switch r.Method {
	case http.MethodPost:
		post = true
	case http.MethodGet:
	default:
		return nil
	}
	p := r.URL.EscapedPath()
	b := 0
	rest, ok := strings.CutPrefix(p, fastBase0+"/")
	if !ok {
		b = 1
		if rest, ok = strings.CutPrefix(p, fastBase1+"/"); !ok {
			return nil
		}
	}
	name, id, two := strings.Cut(rest, "/")
	if !plainSegment(name) {
		return nil
	}
	var rt *fastRoute
	switch {
	case !two && post:
		rt = &f.push[b]
	case !two:
		rt = &f.pull[b]
	case post && plainSegment(id):
		rt = &f.reply[b]
	default:
		return nil
	}
	if rt.h == nil {
		return nil
	}
	return rt
}

// plainSegment: s is not empty and holds printable ASCII bytes other than
// "/" only (an escaped path holds nothing else in practice; anything else
// is left to the router).
func plainSegment(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '/' {
			return false
		}
	}
	return true
}

// pathVar is the path variable key of the route that matched r, still
// escaped (routevar.Var: mux's, or the fast path's).
func pathVar(r *http.Request, key string) string { return routevar.Var(r, key) }
