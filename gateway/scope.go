package gateway

// Scope is the queues an operation may see or reach: those for which it
// returns true; a nil Scope is every queue. It is how a token's queue scope
// (package auth) narrows the operations that match queue names by a regular
// expression (PushAll, PullAny) and the listing (QueueStatuses). It is an
// argument rather than a context value so that what an operation sees is
// written at its call: a context carried into shared work (a cached
// collection, a wake-up) cannot narrow it by accident.
type Scope func(queue string) bool

// Allows reports whether queue is in the scope.
func (s Scope) Allows(queue string) bool { return s == nil || s(queue) }
