package route

import (
	"fmt"
	"strings"
)

// Scope says which queues a route's right applies to.
type Scope uint8

// The scopes. The zero Scope is no declaration at all: Handle refuses it.
const (
	// ScopeQueue: the right on the queue named by the route's {name}.
	ScopeQueue Scope = iota + 1
	// ScopeListed: the right, whatever the token's scope; the route acts
	// on, or lists, only the queues of that scope (push-all, pull-any,
	// GET /queues, /stats).
	ScopeListed
	// ScopeAll: the right on every queue (a token without prefix or
	// regexp): what is not about one queue (the default-properties list,
	// /metrics, the tokens, the console).
	ScopeAll
	// ScopeNone: any valid credential, no right.
	ScopeNone
	// ScopePublic: no credential at all (the health probes).
	ScopePublic
)

// Need is what a request must be allowed to use a route: one of the
// rights of Right (AnyRight: any) on the queues Scope says. OnQueue, Listed
// and OnAll make one; Authenticated and Public need no right. (A number
// rather than a struct, so that these can be constants.)
type Need uint16

func makeNeed(s Scope, r Right) Need { return Need(s)<<8 | Need(r) }

// OnQueue is right on the queue the route's {name} names.
func OnQueue(right Right) Need { return makeNeed(ScopeQueue, right) }

// Listed is right, for a route that sees only the queues of the token's
// scope.
func Listed(right Right) Need { return makeNeed(ScopeListed, right) }

// OnAll is right on every queue.
func OnAll(right Right) Need { return makeNeed(ScopeAll, right) }

// The Needs without a right: any credential, and none.
const (
	Authenticated = Need(ScopeNone) << 8
	Public        = Need(ScopePublic) << 8
)

// Right is the set of rights any one of which the route needs; 0 for none.
func (n Need) Right() Right { return Right(n & 0xff) }

// Scope is the queues the right is needed on.
func (n Need) Scope() Scope { return Scope(n >> 8) }

// String is for messages: the rights and the scope.
func (n Need) String() string {
	var scope string
	switch n.Scope() {
	case ScopeQueue:
		scope = "on the queue"
	case ScopeListed:
		scope = "on the listed queues"
	case ScopeAll:
		scope = "on every queue"
	case ScopeNone:
		scope = "authenticated"
	case ScopePublic:
		scope = "public"
	default:
		scope = fmt.Sprintf("scope %d", n.Scope())
	}
	if n.Right() == 0 {
		return scope
	}
	return n.Right().String() + " " + scope
}

// check explains why need cannot be declared for the template tpl; nil
// when it can.
func (n Need) check(tpl string, prefix bool) error {
	switch n.Scope() {
	case ScopeQueue, ScopeListed, ScopeAll:
		if n.Right() == 0 || n.Right()&^AnyRight != 0 {
			return fmt.Errorf("%s: a right of push, pull and admin is needed, not %d", n, n.Right())
		}
		if n.Scope() == ScopeQueue && !strings.Contains(tpl, "{name}") {
			return fmt.Errorf("a right on the route's queue, but no {name} in its template")
		}
	case ScopeNone, ScopePublic:
		if n.Right() != 0 {
			return fmt.Errorf("a right (%s) without a scope of queues", n.Right())
		}
		// The authentication ahead of the router knows a public route by
		// its path alone (Table.Public), so it must be one literal path.
		if n.Scope() == ScopePublic && (prefix || strings.Contains(tpl, "{")) {
			return fmt.Errorf("a public route must be one literal path")
		}
	default:
		return fmt.Errorf("no need declared")
	}
	return nil
}
