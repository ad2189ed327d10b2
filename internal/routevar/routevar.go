// Package routevar reads the path variables of the HTTP API's matched route
// for its handlers (httpapi) and its middleware (ops), whichever router took
// the request: gorilla/mux, or httpapi's fast path for push, pull and reply,
// which stores no variables and names the route's template in r.Pattern.
package routevar

import (
	"net/http"
	"strings"

	"github.com/gorilla/mux"
)

// Var is the path variable key of the route that matched r, still escaped:
// mux's, or for a request of the fast path (which mux did not see) the
// segment of the escaped path in the place of "{key}" in the template
// r.Pattern, which is what mux extracts for such a path.
func Var(r *http.Request, key string) string {
	if vars := mux.Vars(r); vars != nil {
		return vars[key]
	}
	return templateVar(r.Pattern, r.URL.EscapedPath(), key)
}

// templateVar is the segment of path in the place of the segment "{key}" of
// the route template tpl, or "" when there is none. For a path that matched
// tpl, whose variables are whole segments of mux's default pattern [^/]+,
// that is mux's variable.
func templateVar(tpl, path, key string) string {
	for tpl != "" && path != "" {
		var t, p string
		t, tpl, _ = strings.Cut(tpl, "/")
		p, path, _ = strings.Cut(path, "/")
		if len(t) == len(key)+2 && t[0] == '{' && t[len(t)-1] == '}' && t[1:len(t)-1] == key {
			return p
		}
	}
	return ""
}
