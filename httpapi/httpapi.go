// Package httpapi is the HTTP front end of lmq-gateway: LMQ's REST API
// (/messages, /queues, /properties and the older /msgs, /props) translated
// onto the protocol-neutral core in package gateway.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/peer"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Options configures the HTTP front end.
type Options struct {
	// MaxBodyBytes bounds request bodies (messages and properties).
	MaxBodyBytes int64
	// Logger for errors; slog.Default() when nil.
	Logger *slog.Logger
	// Mount adds more routes (statistics, metrics, health) to the router.
	Mount func(r *mux.Router)
	// Middleware wraps the whole handler (access log, metrics).
	Middleware func(http.Handler) http.Handler
}

type api struct {
	core *gateway.Gateway
	opts Options
	log  *slog.Logger
}

// New returns the HTTP handler of the LMQ API over core.
func New(core *gateway.Gateway, opts Options) http.Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 256 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	a := &api{core: core, opts: opts, log: opts.Logger}
	r := mux.NewRouter()
	// Queue names arrive percent-encoded ("lmq%2Ffoo" is the queue "lmq/foo"):
	// match on the encoded path and decode the variables ourselves, and never
	// "clean" a path, which would redirect names containing "//" or "..".
	r.UseEncodedPath()
	r.SkipClean(true)
	for _, base := range []string{"/messages", "/msgs"} {
		r.HandleFunc(base, a.pushAll).Methods(http.MethodPost)
		r.HandleFunc(base, a.pullAny).Methods(http.MethodGet)
		r.HandleFunc(base+"/{name}", a.push).Methods(http.MethodPost)
		r.HandleFunc(base+"/{name}", a.pull).Methods(http.MethodGet)
		r.HandleFunc(base+"/{name}/{id}", a.reply).Methods(http.MethodPost)
	}
	r.HandleFunc("/queues/{name}", a.deleteQueue).Methods(http.MethodDelete)
	a.mountBeyond(r)
	for _, base := range []string{"/properties", "/props"} {
		r.HandleFunc(base, a.getDefaults).Methods(http.MethodGet)
		r.HandleFunc(base, a.putDefaults).Methods(http.MethodPut)
		r.HandleFunc(base, a.deleteDefaults).Methods(http.MethodDelete)
		r.HandleFunc(base+"/{name}", a.getProps).Methods(http.MethodGet)
		r.HandleFunc(base+"/{name}", a.patchProps).Methods(http.MethodPatch)
		r.HandleFunc(base+"/{name}", a.deleteProps).Methods(http.MethodDelete)
	}
	if opts.Mount != nil {
		opts.Mount(r)
	}
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
	})
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not found")
	})
	var h http.Handler = r
	if opts.Middleware != nil {
		h = opts.Middleware(h)
	}
	return h
}

type connKey struct{}

// ConnContext is for http.Server.ConnContext: it lets handlers see their
// connection, so that a delivery is not written to a client that has gone.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

func clientClosed(r *http.Request) bool {
	c, ok := r.Context().Value(connKey{}).(net.Conn)
	return ok && peer.Closed(c)
}

// queueName decodes the {name} path variable.
func queueName(r *http.Request) (string, error) {
	name, err := url.PathUnescape(mux.Vars(r)["name"])
	if err != nil {
		return "", fmt.Errorf("%w: queue name: %w", gateway.ErrInvalid, err)
	}
	if err := mapping.ValidateQueueName(name); err != nil {
		return "", fmt.Errorf("%w: %w", gateway.ErrInvalid, err)
	}
	return name, nil
}

func (a *api) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.opts.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", a.opts.MaxBodyBytes))
		return nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, "reading body: "+err.Error())
		return nil, false
	}
	return body, true
}

func (a *api) message(w http.ResponseWriter, r *http.Request, queue string) (gateway.Message, bool) {
	body, ok := a.readBody(w, r)
	if !ok {
		return gateway.Message{}, false
	}
	msg := gateway.Message{ContentType: r.Header.Get("Content-Type"), Body: body}
	if queue != "" {
		props, err := a.core.QueueProps(r.Context(), queue)
		if err != nil {
			a.fail(w, r, err)
			return gateway.Message{}, false
		}
		for _, name := range props.Hooks.PreservedHeaders() {
			for _, v := range r.Header.Values(name) {
				msg.Kept = append(msg.Kept, gateway.Header{Name: strings.ToLower(name), Value: v})
			}
		}
	}
	return msg, true
}

func (a *api) push(w http.ResponseWriter, r *http.Request) {
	queue, err := queueName(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if r.URL.Query().Get("batch") != "" {
		a.pushBatch(w, r, queue)
		return
	}
	opts, err := pushOptions(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	msg, ok := a.message(w, r, queue)
	if !ok {
		return
	}
	st, err := a.core.PushWith(r.Context(), queue, msg, opts)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, []byte(`{"accum":"`+string(st)+`"}`))
}

func (a *api) pushAll(w http.ResponseWriter, r *http.Request) {
	re, err := qre(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	msg, ok := a.message(w, r, "")
	if !ok {
		return
	}
	res, err := a.core.PushAll(r.Context(), re, msg)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make(map[string]map[string]string, len(res))
	for q, st := range res {
		out[q] = map[string]string{"accum": string(st)}
	}
	b, _ := json.Marshal(out)
	writeJSON(w, http.StatusOK, b)
}

func qre(r *http.Request) (*regexp.Regexp, error) {
	vals, ok := r.URL.Query()["qre"]
	if !ok || len(vals) == 0 {
		return nil, fmt.Errorf("%w: qre is required", gateway.ErrInvalid)
	}
	re, err := regexp.Compile(vals[0])
	if err != nil {
		return nil, fmt.Errorf("%w: qre: %w", gateway.ErrInvalid, err)
	}
	return re, nil
}

// pullParams reads t (seconds to wait; absent = forever) and cf.
func pullParams(r *http.Request) (time.Duration, string, error) {
	q := r.URL.Query()
	wait := time.Duration(-1)
	if vals, ok := q["t"]; ok {
		t, err := strconv.ParseFloat(firstOf(vals), 64)
		if err != nil || math.IsNaN(t) || math.IsInf(t, 0) || t < 0 {
			return 0, "", fmt.Errorf("%w: t must be a non-negative number of seconds", gateway.ErrInvalid)
		}
		if t*float64(time.Second) >= math.MaxInt64 {
			wait = -1
		} else {
			wait = time.Duration(t * float64(time.Second))
		}
	}
	cf := "multipart"
	if vals, ok := q["cf"]; ok {
		cf = firstOf(vals)
		if cf != "multipart" && cf != "msgpack" {
			return 0, "", fmt.Errorf("%w: cf must be multipart or msgpack", gateway.ErrInvalid)
		}
	}
	return wait, cf, nil
}

func firstOf(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func (a *api) pull(w http.ResponseWriter, r *http.Request) {
	queue, err := queueName(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	wait, cf, err := pullParams(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	d, err := a.core.Pull(r.Context(), queue, wait)
	a.answerPull(w, r, d, err, cf)
}

func (a *api) pullAny(w http.ResponseWriter, r *http.Request) {
	re, err := qre(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	wait, cf, err := pullParams(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	d, err := a.core.PullAny(r.Context(), re, wait)
	a.answerPull(w, r, d, err, cf)
}

func (a *api) answerPull(w http.ResponseWriter, r *http.Request, d *gateway.Delivery, err error, cf string) {
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if d == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	// The server may not have noticed yet that the client closed its
	// connection while waiting, and writing to it would still succeed: ask
	// the socket (see ConnContext) before handing the message over.
	if r.Context().Err() != nil || clientClosed(r) {
		a.core.Abandon(context.Background(), d)
		return
	}
	if err := writeDelivery(w, d, cf); err != nil {
		a.log.Debug("client went away during delivery", "queue", d.Queue, "err", err)
		a.core.Abandon(context.Background(), d)
	}
}

func (a *api) reply(w http.ResponseWriter, r *http.Request) {
	queue, err := queueName(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	id, err := url.PathUnescape(mux.Vars(r)["id"])
	if err != nil {
		a.fail(w, r, fmt.Errorf("%w: message id", gateway.ErrInvalid))
		return
	}
	kind, err := gateway.ParseReply(r.URL.Query().Get("reply"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.core.Reply(r.Context(), queue, id, kind); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) deleteQueue(w http.ResponseWriter, r *http.Request) {
	queue, err := queueName(r)
	if err == nil {
		err = a.core.DeleteQueue(r.Context(), queue)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) getDefaults(w http.ResponseWriter, r *http.Request) {
	l, err := a.core.DefaultProps(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, l.JSON())
}

// jsonBody reads a JSON request body, answering 415 for other content types.
func (a *api) jsonBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "content-type must be application/json")
		return nil, false
	}
	return a.readBody(w, r)
}

func (a *api) putDefaults(w http.ResponseWriter, r *http.Request) {
	body, ok := a.jsonBody(w, r)
	if !ok {
		return
	}
	l, err := mapping.ParseDefaultList(body)
	if err != nil {
		a.fail(w, r, fmt.Errorf("%w: %w", gateway.ErrInvalid, err))
		return
	}
	if err := a.core.SetDefaultProps(r.Context(), l); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) deleteDefaults(w http.ResponseWriter, r *http.Request) {
	if err := a.core.SetDefaultProps(r.Context(), nil); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) getProps(w http.ResponseWriter, r *http.Request) {
	queue, err := queueName(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p, err := a.core.QueueProps(r.Context(), queue)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p.JSON())
}

func (a *api) patchProps(w http.ResponseWriter, r *http.Request) {
	queue, err := queueName(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	body, ok := a.jsonBody(w, r)
	if !ok {
		return
	}
	p, err := mapping.ParseProps(body)
	if err != nil {
		a.fail(w, r, fmt.Errorf("%w: %w", gateway.ErrInvalid, err))
		return
	}
	if err := a.core.UpdateProps(r.Context(), queue, p); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) deleteProps(w http.ResponseWriter, r *http.Request) {
	queue, err := queueName(r)
	if err == nil {
		err = a.core.ResetProps(r.Context(), queue)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// fail maps core errors onto status codes.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, gateway.ErrInvalid), errors.Is(err, mapping.ErrInvalidProps), errors.Is(err, mapping.ErrInvalidName):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, gateway.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, gateway.ErrTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, err.Error())
	case r.Context().Err() != nil:
		// The client is gone; nobody reads an answer.
	case errors.Is(err, gateway.ErrUnavailable):
		a.log.Warn("request failed", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusServiceUnavailable, err.Error())
	default:
		a.log.Error("request failed", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
	}
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
