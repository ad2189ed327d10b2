package httpapi

import (
	"fmt"
	"net/http"
	"strings"
)

// Cross-site requests. A browser sends its saved credentials (basic
// authentication, which it remembers per origin) with any request to the
// gateway, also one that a page on another site makes it send: a form's
// POST (form-encoded, text/plain or multipart bodies need no CORS
// preflight), which would push, respawn or create a token as the user. Such
// a request carries Sec-Fetch-Site (every browser since 2023) or at least
// Origin, which no LMQ client, SDK or curl sends; net/http's
// CrossOriginProtection refuses the state-changing ones (anything but GET,
// HEAD, OPTIONS) whose Sec-Fetch-Site is not same-origin or none, or, when
// Sec-Fetch-Site is absent, whose Origin names a host other than the
// request's Host. Requests with neither header pass untouched, so clients
// that are not browsers see no change.

// NewCrossOriginProtection returns the protection of the HTTP listener,
// letting the browser origins of trusted through as well (each
// "scheme://host[:port]", as a browser sends it in Origin: a console or
// tool served from another origin). An origin is compared with the Origin
// header exactly, so it is normalized first (see NormalizeOrigin).
func NewCrossOriginProtection(trusted []string) (*http.CrossOriginProtection, error) {
	cop := http.NewCrossOriginProtection()
	for _, o := range trusted {
		n, err := NormalizeOrigin(o)
		if err != nil {
			return nil, err
		}
		if err := cop.AddTrustedOrigin(n); err != nil {
			return nil, fmt.Errorf("origin %q: %w", o, err)
		}
	}
	return cop, nil
}

// NormalizeOrigin spells an origin as browsers send it in the Origin header
// (scheme and host in lower case, no default port, no trailing "/"), so that
// one written "HTTPS://Console.Example:443/" still matches; it refuses what
// is not "scheme://host[:port]".
func NormalizeOrigin(o string) (string, error) {
	n := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(o), "/"))
	scheme, host, ok := strings.Cut(n, "://")
	if !ok || scheme == "" || host == "" || strings.ContainsAny(host, "/?#@ ") {
		return "", fmt.Errorf("origin %q: want scheme://host[:port], e.g. https://console.example", o)
	}
	switch scheme {
	case "https":
		host = strings.TrimSuffix(host, ":443")
	case "http":
		host = strings.TrimSuffix(host, ":80")
	}
	return scheme + "://" + host, nil
}

// crossOrigin answers 403 to a request cop refuses, and passes the rest to
// next.
func crossOrigin(next http.Handler, cop *http.CrossOriginProtection) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := cop.Check(r); err != nil {
			// The answer depends on request headers that a cache may not
			// key on (and says no-store as the token refusals do).
			w.Header().Set("Cache-Control", "no-store")
			writeError(w, http.StatusForbidden, "cross-origin request refused: "+err.Error()+
				"; a browser page of another origin may not change anything here (the gateway's --allowed-origins names origins that may)")
			return
		}
		next.ServeHTTP(w, r)
	})
}
