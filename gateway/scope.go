package gateway

import "context"

// queueFilterKey carries the queues a request may reach (see WithQueueFilter).
type queueFilterKey struct{}

// WithQueueFilter returns a context under which the operations that match
// queue names by a regular expression (push-all, pull-any) and the listings
// (queues, statistics) only see the queues allow accepts: the queues in the
// scope of the token that authenticated the request. A nil allow removes a
// filter ctx carries: for work shared between requests (a cached collection
// must not be cut to the scope of whichever request started it).
func WithQueueFilter(ctx context.Context, allow func(queue string) bool) context.Context {
	if allow == nil && queueFilter(ctx) == nil {
		return ctx
	}
	return context.WithValue(ctx, queueFilterKey{}, allow)
}

// queueFilter is the filter WithQueueFilter put in ctx; nil when none.
func queueFilter(ctx context.Context) func(string) bool {
	f, _ := ctx.Value(queueFilterKey{}).(func(string) bool)
	return f
}

// QueueAllowed reports whether ctx's queue filter (WithQueueFilter) lets the
// request see queue; true without a filter. It is for the front ends'
// listings (GET /queues, /stats), which name queues the core returned.
func QueueAllowed(ctx context.Context, queue string) bool {
	f := queueFilter(ctx)
	return f == nil || f(queue)
}
