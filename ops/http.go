package ops

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/internal/jsonreply"
	"github.com/lmq-gateway/lmq-gateway/internal/route"
)

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

// Mount adds /stats, /metrics, /healthz and /readyz (and auth's /tokens
// with Options.Tokens) to the API's route table, and the per-route middleware
// that labels requests with their route and authorizes them by what the
// route needs. It is meant for httpapi.Options.Mount, and must have run
// before Middleware serves: the health probes it declares public are the
// paths Middleware lets through without a credential. (The limit on
// waiting pulls is the core's: gateway.Config.MaxWaitingPulls.)
func (o *Ops) Mount(t *route.Table) {
	t.HandleFunc(PathStats, route.Listed(route.AnyRight), o.serveStats, http.MethodGet, http.MethodHead)
	t.Handle(PathMetrics, route.OnAll(route.RightAdmin), o.metrics.handler, http.MethodGet, http.MethodHead)
	t.HandleFunc(PathHealthz, route.Public, o.serveHealthz, http.MethodGet, http.MethodHead)
	t.HandleFunc(PathReadyz, route.Public, o.serveReadyz, http.MethodGet, http.MethodHead)
	if o.opt.Tokens != nil {
		auth.Mount(t, o.opt.Tokens, o.log)
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
		// The handlers of the routes that list queues (route.ScopeListed)
		// narrow what they hand the core to the token's scope
		// (auth.ScopeOf).
		if p := auth.PrincipalOf(r.Context()); p != nil {
			deny := auth.Authorize(r, need)
			o.metrics.auth.requests.WithLabelValues(p.Namespace(), auth.RightLabel(need.Right()), strconv.FormatBool(deny == "")).Inc()
			if deny != "" {
				writePlain(w, http.StatusForbidden, deny+"\n")
				return
			}
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
		var who *auth.Principal
		public := o.public(r.URL.Path)
		if o.guard.Enabled() && !public {
			who = o.guard.Authenticate(r)
		}
		switch {
		case o.guard.Enabled() && !public && who == nil:
			o.metrics.auth.failures.Inc()
			rec.Header().Set("WWW-Authenticate", o.guard.Challenge())
			writeJSONError(rec, http.StatusUnauthorized, "missing or wrong credentials")
		case who != nil:
			next.ServeHTTP(rec, r.WithContext(auth.WithPrincipal(r.Context(), who)))
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
				slog.String("query", auth.RedactQuery(r.URL.RawQuery)),
				slog.Int("status", rec.status),
				slog.Int64("bytes", rec.bytes),
				slog.Duration("duration", d),
				slog.String("remote", r.RemoteAddr),
			}
			if who != nil {
				// Who asked: a token's namespace, "*" for the operator.
				attrs = append(attrs, slog.String("namespace", who.Namespace()))
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

// AuthMode names the configured authentication, for the start-up log.
func (o *Ops) AuthMode() string { return o.guard.Mode() }

// writeJSON and writeJSONError answer as the token endpoints (auth) do.
func writeJSON(w http.ResponseWriter, status int, v any) { jsonreply.Write(w, status, v) }

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	jsonreply.Error(w, status, msg)
}
