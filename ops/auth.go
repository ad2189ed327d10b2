package ops

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/httpapi/route"
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
// What each route needs (a right, and on which queues) is declared with the
// route itself (route.Need: httpapi/routes.go for the LMQ API, Mount in
// http.go for this package's endpoints, the console's Mount); authorize
// reads it, and a route that sees the queues of the token's scope
// (route.ScopeListed) gets the token's scope as the core's queue filter.

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

// rightLabel names a route's right in the metrics.
func rightLabel(r gateway.Right) string {
	switch r {
	case route.AnyRight:
		return "read"
	case 0:
		return "none"
	}
	return r.String()
}

// authorize checks r against its principal and what its route needs; it
// answers 403 and returns false when the token may not.
func (o *Ops) authorize(w http.ResponseWriter, r *http.Request, need route.Need) bool {
	p := principalOf(r.Context())
	if p == nil {
		return true // authentication is off, or the route is public
	}
	deny := ""
	if t := p.tok; t != nil {
		has := t.Rights()&need.Right() != 0 || need.Right() == 0
		switch need.Scope() {
		case route.ScopeQueue:
			name, err := url.PathUnescape(route.Var(r, "name"))
			if err != nil {
				break // the handler answers 400 and does nothing
			}
			if !has || !t.InScope(name) {
				deny = "token lacks " + strconv.Quote(rightLabel(need.Right())) + " on queue " + strconv.Quote(name)
			}
		case route.ScopeListed:
			if !has {
				deny = "token lacks " + strconv.Quote(rightLabel(need.Right()))
			}
		case route.ScopeAll:
			if !has || !t.Global() {
				deny = "token lacks " + strconv.Quote(rightLabel(need.Right())) + " on every queue"
			}
		case route.ScopeNone, route.ScopePublic:
		default:
			// route.Table accepts no other need: fail closed all the same.
			deny = "route declares no need"
		}
	}
	o.metrics.auth.requests.WithLabelValues(p.namespace(), rightLabel(need.Right()), strconv.FormatBool(deny == "")).Inc()
	if deny != "" {
		writePlain(w, http.StatusForbidden, deny+"\n")
		return false
	}
	return true
}

// AuthModeTokens is added to AuthMode when tokens are on.
const authModeTokens = "tokens"
