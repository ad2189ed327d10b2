package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// queryKey carries a request's parsed query (url.Values) in its context.
type queryKey struct{}

// strictQuery parses the query string of every routed request once, strictly,
// and answers 400 naming the problem when it does not parse. r.URL.Query()
// drops what it cannot parse without a word: "t=%zz" or "t=0;x=1" pulled with
// no t at all (waiting forever), "delay=3600;x=1" pushed without a delay, and
// a query beyond Go's limit of 10,000 parameters lost every one of them.
// Unknown parameters that parse are ignored, as LMQ did: clients send extras.
//
// It runs as router middleware, after the route matched, so it covers the
// routes other packages mount (ops: /stats, /metrics, …) as well. Handlers
// read the result with query(r).
func (a *api) strictQuery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			a.fail(w, r, fmt.Errorf("%w: malformed query string: %w", gateway.ErrInvalid, err))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), queryKey{}, q)))
	})
}

// query returns the request's query parameters as strictQuery parsed them.
func query(r *http.Request) url.Values {
	if q, ok := r.Context().Value(queryKey{}).(url.Values); ok {
		return q
	}
	// Not reached through the router (a handler called directly): nothing
	// vouches for the query, so take only what parses strictly.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return url.Values{}
	}
	return q
}
