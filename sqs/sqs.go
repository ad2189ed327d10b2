// Package sqs is the Amazon SQS-compatible front end: SQS's API, in both
// wire protocols its clients speak (AWS JSON 1.0 and the query protocol),
// on the same queues as LMQ's HTTP and MessagePack-RPC front ends, through
// the core's interface only (Core). One SQS queue is one LMQ queue: a
// receipt handle is a delivery id, VisibilityTimeout the queue's timeout,
// MessageRetentionPeriod its ttl; what LMQ has no property for lives in the
// queue's metadata (QueueMeta). Message attributes travel as kept headers
// (attrs.go), so LMQ clients and NATS programs see them.
//
// Requests are bounded like the other front ends': the body's size
// (Options.MaxRequestBytes), the time to read it and to write the answer,
// and long polls to SQS's 20 seconds; the server bounds connections.
//
// What a request may do is decided by what it carries that a third party
// cannot make up: with authentication (Options.Authenticate) only the
// parameters its signature covers act, so a body the signature leaves out
// (a presigned URL, UNSIGNED-PAYLOAD) may carry none, and a parameter in
// both the URL and the body must have one value; and an action that changes
// state is refused to a request a browser made for a page of another
// origin, or on its own (an image, a link), judged by the action rather
// than the method, since the query protocol works over GET (crossorigin.go
// has the rule). A client that went away before its answer is no failure:
// logged at debug level, recorded as 499, never 500.
package sqs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/internal/route"
)

// Defaults of Options.
const (
	DefaultAccount         = "000000000000"
	DefaultRegion          = "us-east-1"
	DefaultMaxRequestBytes = 4 << 20
	DefaultReadTimeout     = 30 * time.Second
	DefaultWriteTimeout    = 30 * time.Second
)

// Options configure a Server; zero fields take the defaults above.
type Options struct {
	// Account is the account id in queue URLs and ARNs; Region the region in
	// ARNs (requests may name any).
	Account, Region string
	// MaxRequestBytes bounds a request body: SQS's largest message (1 MiB)
	// and its attributes, escaped for JSON or a form.
	MaxRequestBytes int64
	// ReadTimeout bounds reading a request's body, WriteTimeout writing its
	// answer (the long poll's wait does not count).
	ReadTimeout, WriteTimeout time.Duration
	// Authenticate, when set, tells who a request is from its signature
	// (SigV4) and its body, and whether the signature covers the body; an
	// *AuthError says why not. nil, or a nil result: any credentials are
	// accepted and every request has every right.
	Authenticate func(r *http.Request, body []byte) (*auth.SigV4Result, error)
	// CrossOrigin is the HTTP port's protection against requests from
	// browser pages of other origins (its trusted origins, the gateway's
	// --allowed-origins, apply here too); nil: none trusted. See
	// crossorigin.go for the rule on this port.
	CrossOrigin *http.CrossOriginProtection
	Logger      *slog.Logger
}

// Server serves SQS's API on a Core. It is an http.Handler.
type Server struct {
	core Core
	opts Options
	log  *slog.Logger
	// now is the clock of timestamps (tests may stop it).
	now func() time.Time
}

// New returns the SQS front end on core.
func New(core Core, opts Options) *Server {
	if opts.Account == "" {
		opts.Account = DefaultAccount
	}
	if opts.Region == "" {
		opts.Region = DefaultRegion
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CrossOrigin == nil {
		opts.CrossOrigin = http.NewCrossOriginProtection()
	}
	return &Server{core: core, opts: opts, log: opts.Logger, now: time.Now}
}

// request is one SQS request being served.
type request struct {
	*input
	ctx      context.Context
	action   string
	json     bool
	scheme   string
	host     string
	sender   string // SenderId: the access key id, or the account
	prin     *auth.Principal
	queue    string // the queue of QueueUrl, once resolved
	received time.Time
	remote   string // the client's address
}

// handler is an action: it returns the answer (nil: an empty result).
type handler func(s *Server, r *request) (any, error)

// action is an action's handler and the right a token needs for it.
type action struct {
	h     handler
	right route.Right // route.AnyRight: any one (reading)
	// onQueue: the action names a queue (QueueUrl) the token's scope must
	// allow; otherwise it names none, or QueueName (CreateQueue, GetQueueUrl).
	onQueue bool
}

// actions are the supported actions; any other answers UnsupportedOperation.
var actions = map[string]action{
	"CreateQueue":                  {(*Server).createQueue, route.RightAdmin, false},
	"GetQueueUrl":                  {(*Server).getQueueURL, route.AnyRight, false},
	"ListQueues":                   {(*Server).listQueues, route.AnyRight, false},
	"DeleteQueue":                  {(*Server).deleteQueue, route.RightAdmin, true},
	"GetQueueAttributes":           {(*Server).getQueueAttributes, route.AnyRight, true},
	"SetQueueAttributes":           {(*Server).setQueueAttributes, route.RightAdmin, true},
	"PurgeQueue":                   {(*Server).purgeQueue, route.RightAdmin, true},
	"ListDeadLetterSourceQueues":   {(*Server).listDeadLetterSourceQueues, route.AnyRight, true},
	"TagQueue":                     {(*Server).tagQueue, route.RightAdmin, true},
	"UntagQueue":                   {(*Server).untagQueue, route.RightAdmin, true},
	"ListQueueTags":                {(*Server).listQueueTags, route.AnyRight, true},
	"SendMessage":                  {(*Server).sendMessage, route.RightPush, true},
	"SendMessageBatch":             {(*Server).sendMessageBatch, route.RightPush, true},
	"ReceiveMessage":               {(*Server).receiveMessage, route.RightPull, true},
	"DeleteMessage":                {(*Server).deleteMessage, route.RightPull, true},
	"DeleteMessageBatch":           {(*Server).deleteMessageBatch, route.RightPull, true},
	"ChangeMessageVisibility":      {(*Server).changeVisibility, route.RightPull, true},
	"ChangeMessageVisibilityBatch": {(*Server).changeVisibilityBatch, route.RightPull, true},
}

// ServeHTTP serves one request of either protocol.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := newRequestID()
	target := r.Header.Get("X-Amz-Target")
	jsonProto := target != "" || strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-amz-json")
	fail := func(e *apiError) {
		if e.Status >= 500 {
			s.log.Warn("sqs request failed", "status", e.Status, "code", e.Code, "err", e.Message)
		}
		writeError(w, jsonProto, id, e)
	}
	if r.Method != http.MethodPost && !(r.Method == http.MethodGet && !jsonProto) {
		fail(errorf(http.StatusMethodNotAllowed, "InvalidAction", "method %s is not supported; use POST", r.Method))
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.ReadTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		fail(errorf(http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "the request body is larger than %d bytes", s.opts.MaxRequestBytes))
		return
	case err != nil:
		fail(errorf(http.StatusBadRequest, "IncompleteBody", "reading the request body: %v", err))
		return
	}
	_ = rc.SetReadDeadline(time.Time{})

	req := &request{ctx: r.Context(), json: jsonProto, host: r.Host, scheme: "http", received: s.now(), remote: r.RemoteAddr}
	if r.TLS != nil {
		req.scheme = "https"
	}
	// unsignedBody: a signature was checked and does not cover the body.
	unsignedBody := false
	if s.opts.Authenticate != nil {
		res, err := s.opts.Authenticate(r, body)
		if err != nil {
			var ae *AuthError
			if errors.As(err, &ae) {
				status := ae.Status
				if status == 0 {
					status = http.StatusForbidden
				}
				fail(&apiError{Status: status, Shape: ae.Code, Code: ae.Code, Message: ae.Message})
			} else {
				fail(errorf(http.StatusForbidden, "AccessDenied", "%v", err))
			}
			return
		}
		if res != nil {
			req.prin, unsignedBody = res.Principal, res.UnsignedPayload
		}
	}
	req.sender = senderOf(r, s.opts.Account)

	var ae *apiError
	if jsonProto {
		name, ok := strings.CutPrefix(target, "AmazonSQS.")
		if !ok {
			fail(errorf(400, "UnknownOperationException", "X-Amz-Target %q does not name an SQS action", target))
			return
		}
		req.action = name
		if unsignedBody && !emptyJSON(body) {
			fail(errUnsignedBody())
			return
		}
		req.input, ae = decodeJSON(body)
	} else {
		var v url.Values
		if v, ae = queryParams(r.URL.Query(), body, unsignedBody); ae != nil {
			fail(ae)
			return
		}
		req.action = v.Get("Action")
		if req.action == "" {
			fail(errorf(400, "MissingAction", "the request has no Action"))
			return
		}
		req.input, ae = decodeQuery(v)
		if ae == nil && req.QueueURL == "" && r.URL.Path != "/" && r.URL.Path != "" {
			// The query protocol may address the queue by the URL's path.
			req.QueueURL = r.URL.Path
		}
	}
	if ae != nil {
		fail(ae)
		return
	}
	act, ok := actions[req.action]
	if !ok {
		fail(errUnsupported(req.action))
		return
	}
	if act.changesState() {
		if ae := s.browserCheck(r); ae != nil {
			// The answer depends on request headers a cache may not key on.
			w.Header().Set("Cache-Control", "no-store")
			s.log.Debug("sqs request from a browser refused", "action", req.action, "remote", req.remote, "reason", ae.Message)
			fail(ae)
			return
		}
	}
	if act.onQueue {
		if req.queue, ae = s.nameOfURL(req.QueueURL); ae != nil {
			fail(ae)
			return
		}
	}
	if ae := s.authorize(req, act); ae != nil {
		fail(ae)
		return
	}
	out, err := act.h(s, req)
	if err != nil {
		if r.Context().Err() != nil {
			// The client went away (a long poll it aborted): not a failure
			// of the server, and nobody reads the answer. Recorded as the
			// HTTP API records it (499, debug).
			s.log.Debug("sqs client went away", "action", req.action, "queue", req.queue, "err", err)
			w.WriteHeader(StatusClientClosed)
			return
		}
		fail(apiErrorOf(err))
		return
	}
	_ = rc.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
	w.Header().Set("x-amzn-RequestId", id)
	if err := writeAnswer(w, jsonProto, req.action, id, out); err != nil {
		s.log.Debug("sqs answer not written", "action", req.action, "err", err)
	}
}

// StatusClientClosed is the status recorded for a request whose client went
// away before its answer (nginx's 499, as the HTTP API's): no client sees it.
const StatusClientClosed = 499

// queryParams are the parameters of a query-protocol request: its URL's and
// its form body's. Body parameters the signature does not cover
// (unsignedBody) are refused, never merged: a presigned URL would otherwise
// let whoever holds it do anything its signer may. A parameter given in
// both with different values is refused rather than one silently chosen.
func queryParams(u url.Values, body []byte, unsignedBody bool) (url.Values, *apiError) {
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, errorf(400, "MalformedQueryString", "%v", err)
	}
	if unsignedBody && len(v) > 0 {
		return nil, errUnsignedBody()
	}
	for k, vs := range u {
		bv, ok := v[k]
		if !ok {
			v[k] = vs
		} else if !slices.Equal(bv, vs) {
			return nil, errorf(400, "InvalidParameterCombination", "The parameter %s is given in both the URL and the body, with different values; give it once.", k)
		}
	}
	return v, nil
}

// emptyJSON reports whether a JSON body carries no parameter: nothing, or
// an empty object.
func emptyJSON(body []byte) bool {
	b := bytes.TrimSpace(body)
	if len(b) == 0 {
		return true
	}
	if b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	return len(bytes.TrimSpace(b[1:len(b)-1])) == 0
}

func errUnsignedBody() *apiError {
	return errorf(http.StatusForbidden, "AccessDenied", "The request's body carries parameters its signature does not cover (a presigned URL, or X-Amz-Content-Sha256: UNSIGNED-PAYLOAD); put every parameter in the signed URL, or sign the body.")
}

// authorize checks the request's token, like the HTTP routes do: the
// action's right, and the queue in the token's scope.
func (s *Server) authorize(r *request, act action) *apiError {
	if r.prin == nil || r.prin.Token() == nil {
		return nil // auth off, or the operator
	}
	t := r.prin.Token()
	queue := r.queue
	if !act.onQueue {
		queue = r.QueueName
	}
	if t.Rights()&act.right == 0 || (queue != "" && !t.InScope(queue)) {
		return errorf(http.StatusForbidden, "AccessDenied", "token %q may not %s on queue %q", t.Name(), r.action, queue)
	}
	return nil
}

// senderOf is the SenderId of a request: the access key id of its
// signature, or the account when it has none.
func senderOf(r *http.Request, account string) string {
	a := r.Header.Get("Authorization")
	if _, cred, ok := strings.Cut(a, "Credential="); ok {
		if key, _, ok := strings.Cut(cred, "/"); ok && key != "" {
			return key
		}
	}
	return account
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
