// Package httpapi is the HTTP front end of lmq-gateway: LMQ's REST API
// (/messages, /queues, /properties and the older /msgs, /props) translated
// onto the protocol-neutral core in package gateway. Its routes, with what
// a token needs for each, are declared in routes.go on the server's one
// route table (package route), on which Options.Mount adds the others.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/docs"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/clientgone"
	"github.com/lmq-gateway/lmq-gateway/internal/route"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Options configures the HTTP front end.
type Options struct {
	// MaxBodyBytes bounds request bodies (messages and properties).
	MaxBodyBytes int64
	// MaxBufferedBody bounds the bodies read whole into memory: batches,
	// push to all queues (qre), properties (default 32 MiB). A single push
	// is streamed and bounded by MaxBodyBytes alone.
	MaxBufferedBody int64
	// Logger for errors; slog.Default() when nil.
	Logger *slog.Logger
	// Mount adds more routes (statistics, metrics, health, the console) to
	// the route table, each with what it needs, and middleware (t.Use) that
	// runs around every route's handler, the API's own included: labels and
	// authorization.
	Mount func(t *route.Table)
	// Middleware wraps the whole handler (access log, metrics).
	Middleware func(http.Handler) http.Handler
	// Timeouts bound reading request bodies and writing answers (timeouts.go).
	Timeouts Timeouts
	// ConnBound tracks the deliveries pulled with the header
	// X-Lmq-Release-On-Disconnect (connbound.go); the http.Server's
	// ConnState must be its ConnState. nil: the header is refused.
	ConnBound *ConnBound
	// CrossOrigin refuses the state-changing requests that a browser sent
	// from a page of another origin (crossorigin.go), on every route,
	// Mount's included. nil: one trusting no other origin.
	CrossOrigin *http.CrossOriginProtection
}

type api struct {
	core Core
	opts Options
	log  *slog.Logger
}

// New returns the HTTP handler of the LMQ API over core.
func New(core Core, opts Options) http.Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 256 << 20
	}
	if opts.MaxBufferedBody <= 0 {
		opts.MaxBufferedBody = gateway.DefaultMaxBufferedBody
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CrossOrigin == nil {
		opts.CrossOrigin = http.NewCrossOriginProtection()
	}
	a := &api{core: core, opts: opts, log: opts.Logger}
	t := route.NewTable()
	a.routes(t)
	if opts.Mount != nil {
		opts.Mount(t)
	}
	// After Mount's middleware (route labels), so that a 400 for a malformed
	// query is counted under its route; and on the mounted routes too.
	t.Use(a.strictQuery)
	t.MethodNotAllowed(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
	}))
	t.NotFound(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not found")
	}))
	// Every handler reads its body and writes its answer under Timeouts.
	var h http.Handler = withTimeouts(t, opts.Timeouts)
	// Inside Middleware, so that a refused request is logged and counted
	// (and one without credentials is still answered 401).
	h = crossOrigin(h, opts.CrossOrigin)
	if opts.Middleware != nil {
		h = opts.Middleware(h)
	}
	return rawPath(h)
}

// rawPath makes the router (and the access log) see the path as the client
// sent it. Old LMQ clients (go-lmq) put queue names into the request line as
// raw UTF-8 bytes. net/http keeps those in RawPath, but EscapedPath (which the
// router matches on) ignores a RawPath that is not a valid encoding and
// re-encodes the decoded Path instead: a name sent as "x%2Fñ" came out as
// "x/%C3%B1" and was routed as two segments. The request URI's path with its
// non-ASCII bytes (and nothing else) percent-encoded is a valid encoding of
// Path that keeps the client's %2F, so a raw name reaches the same queue as
// its percent-encoded form.
func rawPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := targetPath(r.RequestURI); ok {
			if enc := escapeNonASCII(p); enc != p {
				if dec, err := url.PathUnescape(enc); err == nil && dec == r.URL.Path {
					u := *r.URL
					u.RawPath = enc
					r2 := *r
					r2.URL = &u
					r = &r2
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// targetPath is the path of a request target as the client wrote it: of the
// origin form ("/messages/q?t=1") or of the absolute form
// ("http://host:9980/messages/q"), which go-lmq sends for a name holding
// "/" (it puts the encoded path in URL.Opaque, and Go's client then writes
// the whole URL). LMQ's server took the path of either. ok is false for
// other targets ("*", an authority) and an absolute form without a path.
func targetPath(uri string) (path string, ok bool) {
	if !strings.HasPrefix(uri, "/") {
		// scheme "://" authority path: the authority holds no "/", "?" or
		// "#", so the path starts at the first "/" after "://".
		_, rest, found := strings.Cut(uri, "://")
		if !found {
			return "", false
		}
		i := strings.IndexAny(rest, "/?#")
		if i < 0 || rest[i] != '/' {
			return "", false
		}
		uri = rest[i:]
	}
	path, _, _ = strings.Cut(uri, "?")
	return path, true
}

// escapeNonASCII percent-encodes the bytes of s beyond ASCII.
func escapeNonASCII(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x80 {
			if b.Len() > 0 {
				b.WriteByte(c)
			}
			continue
		}
		if b.Len() == 0 {
			b.Grow(len(s) + 16)
			b.WriteString(s[:i])
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	if b.Len() == 0 {
		return s
	}
	return b.String()
}

type connKey struct{}

// ConnContext is for http.Server.ConnContext: it lets handlers see their
// connection, so that a delivery is not written to a client that has gone.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

func clientClosed(r *http.Request) bool {
	c, ok := r.Context().Value(connKey{}).(net.Conn)
	return ok && clientgone.Closed(c)
}

// StatusClientClosed is the status of a request whose client went away
// before its answer (nginx's 499 "client closed request"): the access log and
// the request metrics show it, the client never sees it.
const StatusClientClosed = 499

// clientGone records that the answer is for nobody, so that an abandoned
// long-poll is not logged and counted as a 200 with no body. The status line
// goes to a closed connection (or is never sent): no client reads it.
func clientGone(w http.ResponseWriter) { w.WriteHeader(StatusClientClosed) }

// statusError is an answer other than the core's errors: 413, 415, …
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

// apiFunc is a handler that reports failure as an error; fail turns it into
// the answer.
type apiFunc func(w http.ResponseWriter, r *http.Request) error

// queueFunc is an apiFunc of one queue, named by the {name} path variable.
type queueFunc func(w http.ResponseWriter, r *http.Request, queue string) error

// errHandler adapts an apiFunc: every handler shares one error path.
type errHandler struct {
	a *api
	f apiFunc
}

func (h errHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h.f(w, r); err != nil {
		h.a.fail(w, r, err)
	}
}

func (a *api) handler(f apiFunc) http.Handler { return errHandler{a: a, f: f} }

func (a *api) named(f queueFunc) http.Handler {
	return errHandler{a: a, f: func(w http.ResponseWriter, r *http.Request) error {
		queue, err := queueName(r)
		if err != nil {
			return err
		}
		return f(w, r, queue)
	}}
}

// queueName decodes the {name} path variable.
func queueName(r *http.Request) (string, error) {
	name, err := url.PathUnescape(route.Var(r, "name"))
	if err != nil {
		return "", fmt.Errorf("%w: queue name: %w", gateway.ErrInvalid, err)
	}
	if err := mapping.ValidateQueueName(name); err != nil {
		return "", fmt.Errorf("%w: %w", gateway.ErrInvalid, err)
	}
	return name, nil
}

// bufferedLimit bounds a body read whole into memory (batches, push to all
// queues, properties); a single push streams up to MaxBodyBytes instead.
func (a *api) bufferedLimit() int64 { return min(a.opts.MaxBodyBytes, a.opts.MaxBufferedBody) }

// tooLarge is the 413 of a body beyond limit.
func tooLarge(limit int64) error {
	return &statusError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", limit)}
}

func (a *api) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := a.bufferedLimit()
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, tooLarge(limit)
	case err != nil:
		return nil, fmt.Errorf("%w: reading body: %w", gateway.ErrInvalid, err)
	}
	return body, nil
}

// message reads a pushed message; for a single queue it keeps the request
// headers its pre_http_push hooks name.
func (a *api) message(w http.ResponseWriter, r *http.Request, queue string) (gateway.Message, error) {
	msg, err := a.messageHead(r, queue)
	if err != nil {
		return gateway.Message{}, err
	}
	body, err := a.readBody(w, r)
	if err != nil {
		return gateway.Message{}, err
	}
	msg.Body = body
	return msg, nil
}

// messageHead is message without the body.
func (a *api) messageHead(r *http.Request, queue string) (gateway.Message, error) {
	msg := gateway.Message{ContentType: r.Header.Get("Content-Type")}
	if queue != "" {
		props, err := a.core.Queues.QueueProps(r.Context(), queue)
		if err != nil {
			return gateway.Message{}, err
		}
		for _, name := range props.Hooks.PreservedHeaders() {
			for _, v := range r.Header.Values(name) {
				msg.Kept = append(msg.Kept, gateway.Header{Name: strings.ToLower(name), Value: v})
			}
		}
	}
	// Headers first: a request whose headers cannot be stored is answered
	// 431 without reading its body.
	if err := gateway.CheckHeaders(msg); err != nil {
		return gateway.Message{}, err
	}
	return msg, nil
}

func (a *api) push(w http.ResponseWriter, r *http.Request, queue string) error {
	if query(r).Get("batch") != "" {
		return a.pushBatch(w, r, queue)
	}
	opts, err := pushOptions(r)
	if err != nil {
		return err
	}
	// The body is not read here: the core streams one larger than a NATS
	// message into the Object Store, so memory does not follow its size.
	if r.ContentLength > a.opts.MaxBodyBytes {
		return tooLarge(a.opts.MaxBodyBytes)
	}
	msg, err := a.messageHead(r, queue)
	if err != nil {
		return err
	}
	body := http.MaxBytesReader(w, r.Body, a.opts.MaxBodyBytes)
	st, err := a.core.Messages.PushStream(r.Context(), queue, msg, body, opts)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return tooLarge(a.opts.MaxBodyBytes)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, []byte(`{"accum":"`+string(st)+`"}`))
	return nil
}

func (a *api) pushAll(w http.ResponseWriter, r *http.Request) error {
	re, err := qre(r)
	if err != nil {
		return err
	}
	msg, err := a.message(w, r, "")
	if err != nil {
		return err
	}
	res, err := a.core.Messages.PushAll(r.Context(), re, msg, auth.ScopeOf(r))
	if err != nil {
		return err
	}
	out := make(map[string]map[string]string, len(res))
	for q, st := range res {
		out[q] = map[string]string{"accum": string(st)}
	}
	b, _ := json.Marshal(out)
	writeJSON(w, http.StatusOK, b)
	return nil
}

func (a *api) pull(w http.ResponseWriter, r *http.Request, queue string) error {
	return a.servePull(w, r, func(ctx context.Context, wait time.Duration) (*gateway.Delivery, error) {
		return a.core.Messages.Pull(ctx, queue, wait)
	})
}

func (a *api) pullAny(w http.ResponseWriter, r *http.Request) error {
	re, err := qre(r)
	if err != nil {
		return err
	}
	return a.servePull(w, r, func(ctx context.Context, wait time.Duration) (*gateway.Delivery, error) {
		return a.core.Messages.PullAny(ctx, re, wait, auth.ScopeOf(r))
	})
}

// servePull reads the parameters every pull has, runs pull with its wait
// and writes the answer.
func (a *api) servePull(w http.ResponseWriter, r *http.Request, pull func(context.Context, time.Duration) (*gateway.Delivery, error)) error {
	wait, cf, err := pullParams(r)
	if err != nil {
		return err
	}
	bound, err := a.wantsBound(r)
	if err != nil {
		return err
	}
	// The delivery records who has it (the console's in-flight list).
	d, err := pull(gateway.WithClient(r.Context(), gateway.ClientHTTP, r.RemoteAddr), wait)
	return a.answerPull(w, r, d, err, cf, bound)
}

// answerPull writes a pull's answer; bound binds the delivery to the
// connection (connbound.go).
func (a *api) answerPull(w http.ResponseWriter, r *http.Request, d *gateway.Delivery, err error, cf string, bound bool) error {
	if err != nil {
		return err
	}
	if d == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	// The server may not have noticed yet that the client closed its
	// connection while waiting, and writing to it would still succeed: ask
	// the socket (see ConnContext) before handing the message over.
	if r.Context().Err() != nil || clientClosed(r) {
		a.core.Messages.Abandon(context.Background(), d)
		clientGone(w)
		return nil
	}
	if err := writeDelivery(w, d, cf); err != nil {
		a.log.Debug("client went away during delivery", "queue", d.Queue, "err", err)
		a.core.Messages.Abandon(context.Background(), d)
		return nil
	}
	if bound {
		a.bind(r, d)
	}
	return nil
}

func (a *api) reply(w http.ResponseWriter, r *http.Request, queue string) error {
	id, err := url.PathUnescape(route.Var(r, "id"))
	if err != nil {
		return fmt.Errorf("%w: message id", gateway.ErrInvalid)
	}
	kind, err := gateway.ParseReply(query(r).Get("reply"))
	if err != nil {
		return err
	}
	if err := a.core.Messages.Reply(r.Context(), queue, id, kind); err != nil {
		return err
	}
	if kind != gateway.Ext {
		a.unbind(r, id)
	}
	return noContent(w, nil)
}

func (a *api) deleteQueue(w http.ResponseWriter, r *http.Request, queue string) error {
	return noContent(w, a.core.Queues.DeleteQueue(r.Context(), queue))
}

// noContent answers 204 unless err.
func noContent(w http.ResponseWriter, err error) error {
	if err == nil {
		w.WriteHeader(http.StatusNoContent)
	}
	return err
}

// retryAfterSeconds is the Retry-After of 503 answers: soon, since the
// usual causes (a leader election, a reconnect, space freed) pass in seconds.
const retryAfterSeconds = "1"

// fail answers an error: a statusError as it says, the core's errors by
// their kind (gateway.KindOf, where their precedence is decided).
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	var se *statusError
	if errors.As(err, &se) {
		writeError(w, se.status, se.msg)
		return
	}
	kind := gateway.KindOf(err)
	if !kind.ClientFault() && r.Context().Err() != nil {
		// The client is gone; nobody reads an answer. (A refusal of the
		// request itself is still answered as one.)
		clientGone(w)
		return
	}
	switch kind {
	case gateway.KindInvalid:
		writeError(w, http.StatusBadRequest, err.Error())
	case gateway.KindNotFound:
		if errors.Is(err, gateway.ErrAlreadyAcked) {
			// Still LMQ's 404, but a client retrying an ack can tell it is done.
			w.Header().Set("X-Lmq-Delivery-State", "acked")
		}
		writeError(w, http.StatusNotFound, err.Error())
	case gateway.KindTooManyQueues:
		// The request is fine, the gateway's state refuses it: a client
		// (or an operator) resolves it by deleting a queue.
		writeError(w, http.StatusConflict, err.Error())
	case gateway.KindTooLarge:
		writeError(w, http.StatusRequestEntityTooLarge, err.Error())
	case gateway.KindHeaderTooLarge:
		writeError(w, http.StatusRequestHeaderFieldsTooLarge, err.Error())
	case gateway.KindUnavailable:
		if errors.Is(err, gateway.ErrBusy) {
			// The limit at work, not a failure: one line per refused pull
			// would flood the log just when the gateway is busiest.
			a.log.Debug("request refused", "path", r.URL.Path, "err", err)
		} else {
			a.log.Warn("request failed", "path", r.URL.Path, "err", err)
		}
		// Nothing happened and the same request may succeed later (JetStream
		// back, space freed): say when to try again, as the pull limit does.
		w.Header().Set("Retry-After", retryAfterSeconds)
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case gateway.KindUnknown:
		// Not 503: the push may be stored, the ack may be applied. A client
		// retries a push with the same Idempotency-Key to be safe.
		a.log.Warn("request outcome unknown", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusGatewayTimeout, err.Error())
	case gateway.KindCanceled:
		// Not the client's context (that case is above): the gateway is
		// stopping, or a bound of its own ran out. Not a failure a retry
		// would meet again.
		a.log.Debug("request cut short", "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", retryAfterSeconds)
		writeError(w, http.StatusServiceUnavailable, err.Error())
	default:
		a.log.Error("request failed", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

// serveOpenAPI answers docs/openapi.yaml, embedded in the binary.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	doc := docs.OpenAPI()
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
	_, _ = io.WriteString(w, doc)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	writeJSON(w, status, b)
}
