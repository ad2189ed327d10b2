package route

import (
	"net/http"
	"strings"
)

// The fast match: for the templates of literal segments and {var}
// segments (and literal prefixes) that every route of the gateway has, the
// route gorilla/mux would choose is found by comparing the escaped path's
// segments with each template's, in the table's order, instead of running
// each route's regular expression on the path (and the chosen one's again
// for its variables).
//
// Why not mux alone: in CPU profiles of the gateway under lmq-bench's
// closed-loop push and pull+ack (docs/benchmarks-history.md, issue 26), mux's matching
// took 4% of the gateway's CPU on push and 7% on pull and ack (each route
// tried is a regular expression run over the path: the ack's path is long),
// against 1% this way, and lmq-bench's CPU per pulled message was 6-14%
// higher; the requests are small and many.
//
// It is derived from the same declarations as mux's routes, so routes are
// still written once, and it only ever answers what mux would: the
// expression mux builds for such a template (UseEncodedPath, no strict
// slash) is "^" + the literal segments, each variable "[^/]+" + "$" (no
// "$" for a prefix), matched on URL.EscapedPath(), and a method matches
// when it is one of the route's, compared exactly; mux takes the first
// route in order where both match. The first route it cannot express ends
// the fast routes (Table.prepare), and a request none of them takes goes
// to mux, which decides everything else (404 and 405 included).
// TestFastMatchIsMux checks the two agree.

// maxFastVars bounds the variables of a template the fast match takes.
const maxFastVars = 4

// segment is one "/"-separated segment of a template: literal text, or a
// variable (the index of its value).
type segment struct {
	lit string
	v   int // -1: literal
}

// segments is the fast form of a template: its segments after the leading
// "/" (a prefix's literal text as one segment); nil when the fast match
// cannot take it: not starting with "/", a variable with its own pattern
// ("{id:[0-9]+}") or sharing a segment with text, more than maxFastVars
// variables, a prefix with a variable, or anything beyond ASCII (mux's
// expression compares runes, this bytes).
func segments(tpl string, prefix bool) []segment {
	if !strings.HasPrefix(tpl, "/") {
		return nil
	}
	for i := 0; i < len(tpl); i++ {
		if tpl[i] >= 0x80 {
			return nil
		}
	}
	if prefix {
		if strings.ContainsAny(tpl, "{}") {
			return nil
		}
		return []segment{{lit: tpl, v: -1}}
	}
	var segs []segment
	vars := 0
	for _, s := range strings.Split(tpl[1:], "/") {
		name, isVar := strings.CutPrefix(s, "{")
		if isVar {
			name, isVar = strings.CutSuffix(name, "}")
		}
		switch {
		case isVar && name != "" && !strings.ContainsAny(name, "{}:") && vars < maxFastVars:
			segs = append(segs, segment{v: vars})
			vars++
		case strings.ContainsAny(s, "{}"):
			return nil
		default:
			segs = append(segs, segment{lit: s, v: -1})
		}
	}
	return segs
}

// fastMatch is the route of the fast routes that mux would choose for r,
// its variables' values in m.vals; nil when none takes r.
func (t *Table) fastMatch(r *http.Request, m *match) *declared {
	path := r.URL.EscapedPath()
	for _, d := range t.fast {
		if d.matchPath(path, &m.vals) && d.allows(r.Method) {
			return d
		}
	}
	return nil
}

// matchPath reports whether path matches d's template, setting the
// variables' values in vals.
func (d *declared) matchPath(path string, vals *[maxFastVars]string) bool {
	if d.prefix {
		return strings.HasPrefix(path, d.segs[0].lit)
	}
	rest, ok := strings.CutPrefix(path, "/")
	if !ok {
		return false
	}
	for i, s := range d.segs {
		seg, after, more := strings.Cut(rest, "/")
		if more != (i < len(d.segs)-1) {
			return false // fewer or more segments than the template
		}
		if s.v < 0 {
			if seg != s.lit {
				return false
			}
		} else {
			if seg == "" {
				return false // [^/]+: one byte at least
			}
			vals[s.v] = seg
		}
		rest = after
	}
	return true
}

// allows reports whether d takes method, as mux's Methods matcher does.
func (d *declared) allows(method string) bool {
	for _, m := range d.methods {
		if m == method {
			return true
		}
	}
	return false
}
