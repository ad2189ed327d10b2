package ops

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// Token authentication (beyond LMQ, after lmstfy's namespaces): with
// Options.Tokens set, every request but the health probes carries either the
// operator's credential (Options.Auth: --auth-token or --auth-basic, every
// right on every queue) or a token of the store, as "Authorization: Bearer
// <token>" or, for lmstfy's clients, the query parameter "token". Without
// either: 401. The outer middleware authenticates; the router's middleware
// (which knows the route) authorizes, answering 403 with a plain-text body
// naming the right and queue the token lacks.
//
// What each route needs (scope: the token's queues):
//
//	push:  POST /messages/{q} (and /msgs); POST /messages?qre= (push-all,
//	       on the queues in scope only)
//	pull:  GET /messages/{q}, POST /messages/{q}/{id} (ack, nack, ext);
//	       GET /messages?qre= (pull-any, on the queues in scope only)
//	admin: /properties/{q} (and /props), DELETE /queues/{q}, /queues/{q}/dead…
//	any right on the queue: GET /queues/{q}
//	any token: GET /queues and /stats (listing the queues in scope only),
//	       /openapi.yaml
//	admin on every queue (a token without prefix or regexp): the default
//	       list (/properties), /metrics (not filtered), /tokens…, and any
//	       route not named here.

// TokenStore is the store of tokens (gateway.Tokens).
type TokenStore interface {
	Authenticate(token string) (*gateway.Token, bool)
	CreateToken(ctx context.Context, spec gateway.TokenSpec) (string, gateway.TokenInfo, error)
	ListTokens(ctx context.Context) []gateway.TokenInfo
	Token(id string) (gateway.TokenInfo, bool)
	RevokeToken(ctx context.Context, id string) error
	Len() int
}

// principal is who a request authenticated as: the operator (tok nil) or a
// token.
type principal struct {
	tok *gateway.Token
}

// operatorNamespace labels the operator's requests in the metrics (token
// names cannot contain "*").
const operatorNamespace = "*"

func (p *principal) namespace() string {
	if p.tok == nil {
		return operatorNamespace
	}
	return p.tok.Name()
}

type principalKey struct{}

func principalOf(ctx context.Context) *principal {
	p, _ := ctx.Value(principalKey{}).(*principal)
	return p
}

// authEnabled reports whether requests must authenticate.
func (o *Ops) authEnabled() bool { return o.opt.Auth.Enabled() || o.opt.Tokens != nil }

// authenticate returns who r is; nil when it carries no valid credential.
func (o *Ops) authenticate(r *http.Request) *principal {
	if o.opt.Auth.Enabled() && o.opt.Auth.check(r) {
		return &principal{}
	}
	if o.opt.Tokens == nil {
		return nil
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		tok = queryToken(r.URL.RawQuery)
	}
	if tok == "" {
		return nil
	}
	if t, ok := o.opt.Tokens.Authenticate(tok); ok {
		return &principal{tok: t}
	}
	return nil
}

// queryToken is the "token" query parameter ("" when absent or malformed:
// the strict query parser answers 400 for the latter, after the 401).
func queryToken(raw string) string {
	if !strings.Contains(raw, "token") && !strings.Contains(raw, "%") {
		return "" // the common case, without parsing
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return ""
	}
	return q.Get("token")
}

// redactQuery hides the "token" query parameter's value from the access log.
func redactQuery(raw string) string {
	if !strings.Contains(raw, "token") && !strings.Contains(raw, "%") {
		return raw
	}
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		k, _, _ := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); (err == nil && uk == "token") || k == "token" {
			parts[i] = k + "=REDACTED"
		}
	}
	return strings.Join(parts, "&")
}

// scopeKind says which queues a route's right applies to.
type scopeKind uint8

const (
	scopeQueue  scopeKind = iota // the route's {name}
	scopeAny                     // the right on some queue; the route sees the queues in scope
	scopeGlobal                  // the right on every queue
	scopeNone                    // any token
)

// needRead is "any right" (for reading about a queue).
const needRead = gateway.RightPush | gateway.RightPull | gateway.RightAdmin

// requirement tells what a route needs (see the package comment above).
func requirement(method, tmpl string) (gateway.Right, scopeKind) {
	for _, base := range []string{"/messages", "/msgs"} {
		switch {
		case tmpl == base && method == http.MethodPost:
			return gateway.RightPush, scopeAny
		case tmpl == base:
			return gateway.RightPull, scopeAny
		case tmpl == base+"/{name}" && method == http.MethodPost:
			return gateway.RightPush, scopeQueue
		case tmpl == base+"/{name}":
			return gateway.RightPull, scopeQueue
		case tmpl == base+"/{name}/{id}":
			return gateway.RightPull, scopeQueue
		}
	}
	for _, base := range []string{"/properties", "/props"} {
		switch tmpl {
		case base:
			return gateway.RightAdmin, scopeGlobal
		case base + "/{name}":
			return gateway.RightAdmin, scopeQueue
		}
	}
	switch {
	case tmpl == "/queues" || tmpl == PathStats:
		return needRead, scopeAny
	case tmpl == "/queues/{name}" && method == http.MethodGet:
		return needRead, scopeQueue
	case tmpl == "/queues/{name}" || strings.HasPrefix(tmpl, "/queues/{name}/dead"):
		return gateway.RightAdmin, scopeQueue
	case tmpl == "/openapi.yaml":
		return 0, scopeNone
	}
	return gateway.RightAdmin, scopeGlobal
}

func rightLabel(r gateway.Right) string {
	switch r {
	case needRead:
		return "read"
	case 0:
		return "none"
	}
	return r.String()
}

// authorize checks r (routed to tmpl) against its principal; it answers 403
// and returns false when the token may not.
func (o *Ops) authorize(w http.ResponseWriter, r *http.Request, tmpl string) bool {
	p := principalOf(r.Context())
	if p == nil {
		return true // authentication is off
	}
	right, kind := requirement(r.Method, tmpl)
	deny := ""
	if t := p.tok; t != nil {
		has := t.Rights()&right != 0 || right == 0
		switch kind {
		case scopeQueue:
			name, err := url.PathUnescape(routeVar(r, "name"))
			if err != nil {
				break // the handler answers 400 and does nothing
			}
			if !has || !t.InScope(name) {
				deny = "token lacks " + strconv.Quote(rightLabel(right)) + " on queue " + strconv.Quote(name)
			}
		case scopeAny:
			if !has {
				deny = "token lacks " + strconv.Quote(rightLabel(right))
			}
		case scopeGlobal:
			if !has || !t.Global() {
				deny = "token lacks " + strconv.Quote(rightLabel(right)) + " on every queue"
			}
		}
	}
	o.metrics.auth.requests.WithLabelValues(p.namespace(), rightLabel(right), strconv.FormatBool(deny == "")).Inc()
	if deny != "" {
		writePlain(w, http.StatusForbidden, deny+"\n")
		return false
	}
	return true
}

// AuthModeTokens is added to AuthMode when tokens are on.
const authModeTokens = "tokens"
