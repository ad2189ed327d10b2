// Package auth is who may do what over HTTP: the access tokens and their
// store on a KV bucket (tokens.go), the operator's credential, the checks
// the HTTP middleware (package ops) makes of a request — authenticate it,
// then authorize it by the need its route declares in the route table
// (package route) — the /tokens endpoints that manage the tokens (api.go),
// and AWS Signature Version 4 for the SQS front end, whose keys are the same
// credentials (sigv4.go).
//
// A token's queue scope reaches the core as an argument (gateway.Scope),
// which the front ends take from the request with ScopeOf; the core never
// reads it from a context.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/route"
)

// Token authentication (beyond LMQ, after lmstfy's namespaces): with a token
// Store, every request but the health probes carries either the operator's
// credential (--auth-token or --auth-basic, every right on every queue) or
// a token of the store, as "Authorization: Bearer <token>" or, for
// lmstfy's clients, the query parameter "token". Without either: 401. The
// outer middleware authenticates; the router's middleware (which knows the
// route) authorizes, answering 403 with a plain-text body naming the right
// and queue the token lacks.

// Credential is the operator's credential (LMQ had none): what the server
// accepts, and what a client of it (the status command) sends. When both
// are set, either is accepted.
type Credential struct {
	// BearerToken: "Authorization: Bearer <token>".
	BearerToken string
	// BasicUser and BasicPassword: "Authorization: Basic ...".
	BasicUser, BasicPassword string
}

// Enabled reports whether any credential is configured.
func (c Credential) Enabled() bool { return c.BearerToken != "" || c.BasicUser != "" }

// Set puts the credential on a request of a client (the bearer token when
// there is one, else basic).
func (c Credential) Set(r *http.Request) {
	switch {
	case c.BearerToken != "":
		r.Header.Set("Authorization", "Bearer "+c.BearerToken)
	case c.BasicUser != "":
		r.SetBasicAuth(c.BasicUser, c.BasicPassword)
	}
}

// check reports whether r carries the credential.
func (c Credential) check(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	if c.BearerToken != "" {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok && secretEqual(tok, c.BearerToken) {
			return true
		}
	}
	if c.BasicUser != "" {
		if u, p, ok := r.BasicAuth(); ok && secretEqual(u, c.BasicUser) && secretEqual(p, c.BasicPassword) {
			return true
		}
	}
	return false
}

func (c Credential) mode() string {
	switch {
	case c.BearerToken != "" && c.BasicUser != "":
		return "bearer or basic"
	case c.BearerToken != "":
		return "bearer"
	case c.BasicUser != "":
		return "basic"
	}
	return "none"
}

// secretEqual compares in constant time; hashing first hides the length too.
func secretEqual(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// Guard authenticates requests: by the operator's credential, or by a token
// of the store. The zero Guard lets every request through.
type Guard struct {
	operator Credential
	tokens   *Store
}

// NewGuard returns the guard of operator's credential and the tokens of
// store (nil: no tokens).
func NewGuard(operator Credential, store *Store) *Guard {
	return &Guard{operator: operator, tokens: store}
}

// Enabled reports whether requests must authenticate.
func (g *Guard) Enabled() bool { return g.operator.Enabled() || g.tokens != nil }

// Tokens is the guard's token store; nil without tokens.
func (g *Guard) Tokens() *Store { return g.tokens }

// Authenticate returns who r is; nil when it carries no valid credential.
func (g *Guard) Authenticate(r *http.Request) *Principal {
	if g.operator.Enabled() && g.operator.check(r) {
		return &Principal{}
	}
	if g.tokens == nil {
		return nil
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		tok = queryToken(r.URL.RawQuery)
	}
	if tok == "" {
		return nil
	}
	if t, ok := g.tokens.Authenticate(tok); ok {
		return &Principal{tok: t}
	}
	return nil
}

// Challenge is the WWW-Authenticate of a 401.
func (g *Guard) Challenge() string {
	if g.tokens != nil || g.operator.BearerToken != "" {
		return `Bearer realm="lmq-gateway"`
	}
	return `Basic realm="lmq-gateway"`
}

// Mode names the configured authentication, for the start-up log.
func (g *Guard) Mode() string {
	m := g.operator.mode()
	if g.tokens != nil {
		if m == "none" {
			return "tokens (no operator credential)"
		}
		return "tokens and operator " + m
	}
	return m
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

// RedactQuery hides the "token" query parameter's value, for the access log.
func RedactQuery(raw string) string {
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

// Principal is who a request authenticated as: the operator, or a token.
type Principal struct {
	tok *Token // nil: the operator
}

// Token is the principal's token; nil for the operator.
func (p *Principal) Token() *Token { return p.tok }

// operatorNamespace labels the operator's requests in the metrics (token
// names cannot contain "*").
const operatorNamespace = "*"

// Namespace labels the principal's requests in the metrics and the access
// log: the token's name, "*" for the operator.
func (p *Principal) Namespace() string {
	if p.tok == nil {
		return operatorNamespace
	}
	return p.tok.Name()
}

type principalKey struct{}

// WithPrincipal is ctx for a request that authenticated as p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalOf is who the request of ctx authenticated as; nil when
// authentication is off or the route is public.
func PrincipalOf(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// ScopeOf is the queues the request r may see or reach: its token's scope,
// nil (every queue) for the operator or without authentication. The front
// ends hand it to the core's operations on the queues a route lists
// (route.ScopeListed: push-all, pull-any, GET /queues, /stats); the other
// routes were authorized for their queue, or for every queue, already.
func ScopeOf(r *http.Request) gateway.Scope {
	if p := PrincipalOf(r.Context()); p != nil && p.tok != nil {
		return p.tok.Scope()
	}
	return nil
}

// RightLabel names a route's right in the metrics.
func RightLabel(r route.Right) string {
	switch r {
	case route.AnyRight:
		return "read"
	case 0:
		return "none"
	}
	return r.String()
}

// Authorize checks r, of a route that needs need, against its principal:
// "" when it may go on, else why not (the 403's text).
func Authorize(r *http.Request, need route.Need) (deny string) {
	p := PrincipalOf(r.Context())
	if p == nil || p.tok == nil {
		// Authentication is off, the route is public, or the operator.
		return ""
	}
	t := p.tok
	has := t.Rights()&need.Right() != 0 || need.Right() == 0
	switch need.Scope() {
	case route.ScopeQueue:
		name, err := url.PathUnescape(route.Var(r, "name"))
		if err != nil {
			return "" // the handler answers 400 and does nothing
		}
		if !has || !t.InScope(name) {
			return "token lacks " + strconv.Quote(RightLabel(need.Right())) + " on queue " + strconv.Quote(name)
		}
	case route.ScopeListed:
		if !has {
			return "token lacks " + strconv.Quote(RightLabel(need.Right()))
		}
	case route.ScopeAll:
		if !has || !t.Global() {
			return "token lacks " + strconv.Quote(RightLabel(need.Right())) + " on every queue"
		}
	case route.ScopeNone, route.ScopePublic:
	default:
		// route.Table accepts no other need: fail closed all the same.
		return "route declares no need"
	}
	return ""
}
