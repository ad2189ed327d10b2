package ops

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/httpapi/route"
)

// Auth is the optional authentication of the HTTP API (LMQ had none). When
// both are set, either credential is accepted. Health endpoints never ask.
type Auth struct {
	// BearerToken: "Authorization: Bearer <token>".
	BearerToken string
	// BasicUser and BasicPassword: "Authorization: Basic ...".
	BasicUser, BasicPassword string
}

// Enabled reports whether any credential is configured.
func (a Auth) Enabled() bool { return a.BearerToken != "" || a.BasicUser != "" }

// check reports whether r carries a configured credential.
func (a Auth) check(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	if a.BearerToken != "" {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok && secretEqual(tok, a.BearerToken) {
			return true
		}
	}
	if a.BasicUser != "" {
		if u, p, ok := r.BasicAuth(); ok && secretEqual(u, a.BasicUser) && secretEqual(p, a.BasicPassword) {
			return true
		}
	}
	return false
}

// secretEqual compares in constant time; hashing first hides the length too.
func secretEqual(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// challenge is the WWW-Authenticate of a 401.
func (o *Ops) challenge() string {
	if o.opt.Tokens != nil {
		return `Bearer realm="lmq-gateway"`
	}
	return o.opt.Auth.challenge()
}

func (a Auth) challenge() string {
	if a.BearerToken != "" {
		return `Bearer realm="lmq-gateway"`
	}
	return `Basic realm="lmq-gateway"`
}

// Paths of the endpoints package ops adds.
const (
	PathStats   = "/stats"
	PathMetrics = "/metrics"
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
)

// routeOf finds the recorder of the outer middleware behind w (the writer
// the router's handlers get may wrap it, see httpapi's timedWriter): the
// router's middleware names the route there. A writer field rather than a
// context value, which would cost a copy of every request.
func routeOf(w http.ResponseWriter) *recorder {
	for {
		switch x := w.(type) {
		case *recorder:
			return x
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

// Mount adds /stats, /metrics, /healthz and /readyz (and /tokens with
// Options.Tokens) to the API's route table, and the per-route middleware
// that labels requests with their route and authorizes them by what the
// route needs. It is meant for httpapi.Options.Mount, and must have run
// before Middleware serves: the health probes it declares public are the
// paths Middleware lets through without a credential. (The limit on
// waiting pulls is the core's: gateway.Config.MaxWaitingPulls.)
func (o *Ops) Mount(t *route.Table) {
	t.HandleFunc(PathStats, route.Listed(route.AnyRight), o.serveStats, http.MethodGet, http.MethodHead)
	t.Handle(PathMetrics, route.OnAll(gateway.RightAdmin), o.metrics.handler, http.MethodGet, http.MethodHead)
	t.HandleFunc(PathHealthz, route.Public, o.serveHealthz, http.MethodGet, http.MethodHead)
	t.HandleFunc(PathReadyz, route.Public, o.serveReadyz, http.MethodGet, http.MethodHead)
	if o.opt.Tokens != nil {
		o.mountTokens(t)
	}
	t.Use(o.routeMiddleware)
	o.routes = t
}

func (o *Ops) routeMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tmpl, need, ok := route.Matched(r)
		// Read by the outer middleware (which wraps the router, and so sees
		// every request, unmatched ones too).
		if rec := routeOf(w); rec != nil {
			rec.template = tmpl
		}
		if !ok {
			// Only a route declared on the route.Table with its need gets
			// here; anything else is a bug to see at once, not a route open
			// to every token.
			o.log.Error("route declares no need", "method", r.Method, "route", tmpl)
			writeJSONError(w, http.StatusInternalServerError, "route declares no need")
			return
		}
		if !o.authorize(w, r, need) {
			return
		}
		if p := principalOf(r.Context()); p != nil && p.tok != nil && need.Scope() == route.ScopeListed {
			// push-all, pull-any and the listings see the token's queues
			// only: the core and Queues read the filter from the context.
			r = r.WithContext(gateway.WithQueueFilter(r.Context(), p.tok.InScope))
		}
		next.ServeHTTP(w, r)
	})
}

// Middleware wraps the whole HTTP handler: authentication, request metrics
// and the access log. It is meant for httpapi.Options.Middleware.
func (o *Ops) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		var who *principal
		public := o.public(r.URL.Path)
		if o.authEnabled() && !public {
			who = o.authenticate(r)
		}
		switch {
		case o.authEnabled() && !public && who == nil:
			o.metrics.auth.failures.Inc()
			rec.Header().Set("WWW-Authenticate", o.challenge())
			writeJSONError(rec, http.StatusUnauthorized, "missing or wrong credentials")
		case who != nil:
			next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), principalKey{}, who)))
		default:
			next.ServeHTTP(rec, r)
		}
		if !rec.wroteHeader && r.Context().Err() != nil {
			// The client went away and nothing was answered (net/http would
			// otherwise report an empty 200): nginx's "client closed request".
			rec.status = statusClientClosed
		}
		d := time.Since(start)
		route := rec.template
		if route == "" {
			route = "other" // no route matched: 404, 405 or refused before routing
		}
		o.metrics.requests.WithLabelValues(methodLabel(r.Method), route, strconv.Itoa(rec.status)).Observe(d.Seconds())
		if o.opt.AccessLog {
			attrs := []slog.Attr{
				slog.String("method", r.Method),
				slog.String("path", r.URL.EscapedPath()),
				slog.String("query", redactQuery(r.URL.RawQuery)),
				slog.Int("status", rec.status),
				slog.Int64("bytes", rec.bytes),
				slog.Duration("duration", d),
				slog.String("remote", r.RemoteAddr),
			}
			if who != nil {
				// Who asked: a token's namespace, "*" for the operator.
				attrs = append(attrs, slog.String("namespace", who.namespace()))
			}
			o.log.LogAttrs(r.Context(), slog.LevelInfo, "http request", attrs...)
		}
	})
}

// statusClientClosed is what the access log and metrics show for a request
// whose client left before its answer, as nginx logs it (httpapi writes the
// same status for an abandoned pull).
const statusClientClosed = 499

// methodLabel bounds the method label: clients may send any token as a
// method, and each would otherwise make new series.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodHead, http.MethodOptions:
		return m
	}
	return "other"
}

// public reports whether path is a route declared route.Public (the health
// probes) on the table Mount was given; without one, none is.
func (o *Ops) public(path string) bool { return o.routes != nil && o.routes.Public(path) }

// recorder remembers a response's status and size.
type recorder struct {
	http.ResponseWriter
	// template is the matched route's, set by the router's middleware.
	template    string
	status      int
	bytes       int64
	wroteHeader bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wroteHeader = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (Flush, deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush is forwarded for handlers that stream with http.Flusher.
func (r *recorder) Flush() {
	r.wroteHeader = true
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// AuthMode names the configured authentication, for the start-up log.
func (o *Ops) AuthMode() string {
	m := o.opt.Auth.mode()
	if o.opt.Tokens != nil {
		if m == "none" {
			return authModeTokens + " (no operator credential)"
		}
		return authModeTokens + " and operator " + m
	}
	return m
}

func (a Auth) mode() string {
	switch {
	case a.BearerToken != "" && a.BasicUser != "":
		return "bearer or basic"
	case a.BearerToken != "":
		return "bearer"
	case a.BasicUser != "":
		return "basic"
	}
	return "none"
}
