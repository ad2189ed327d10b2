package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

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
		if r.URL.RawQuery == "" {
			// Nothing to parse (a plain push): query(r) answers an empty
			// query without the request copy that a context value costs.
			next.ServeHTTP(w, r)
			return
		}
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			a.fail(w, r, fmt.Errorf("%w: malformed query string: %w", gateway.ErrInvalid, err))
			return
		}
		// Kept in the request's Form, in place, where ParseForm would put
		// a query: a context value would cost a copy of the request.
		// Nothing here parses forms (bodies are JSON or the message).
		r.Form = q
		next.ServeHTTP(w, r)
	})
}

// query returns the request's query parameters as strictQuery parsed them.
func query(r *http.Request) url.Values {
	if r.URL.RawQuery == "" {
		return nil // reads as empty; callers only read
	}
	if r.Form != nil {
		return r.Form // set by strictQuery
	}
	// Not reached through the router (a handler called directly): nothing
	// vouches for the query, so take only what parses strictly.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return url.Values{}
	}
	return q
}

// pushOptions reads ?delay=, ?ttl=, ?priority=, ?group= and the
// Idempotency-Key header with the core's parser (PushOptions.SetText).
// Beyond LMQ: priority (0..9, higher served first), group (an ordered
// group, gateway/groups.go) and the key (a retried push with the same key is
// stored once, gateway.IdempotencyWindow). Absent or empty, delay, ttl and
// priority are the queue's properties; a group given must be named.
func pushOptions(r *http.Request) (gateway.PushOptions, error) {
	var o gateway.PushOptions
	q := query(r)
	for _, name := range []string{gateway.OptDelay, gateway.OptTTL, gateway.OptPriority} {
		if v := q.Get(name); v != "" {
			if err := o.SetText(name, v); err != nil {
				return o, fmt.Errorf("%w: %w", gateway.ErrInvalid, err)
			}
		}
	}
	if vals, ok := q[gateway.OptGroup]; ok && len(vals) > 0 {
		if err := o.SetText(gateway.OptGroup, vals[0]); err != nil {
			return o, fmt.Errorf("%w: %w", gateway.ErrInvalid, err)
		}
	}
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if err := o.SetText(gateway.OptIdempotencyKey, key); err != nil {
			return o, fmt.Errorf("%w: %w", gateway.ErrInvalid, err)
		}
	}
	return o, nil
}

// qre reads the regular expression of push-all and pull-any.
func qre(r *http.Request) (*regexp.Regexp, error) {
	vals, ok := query(r)["qre"]
	if !ok || len(vals) == 0 {
		return nil, fmt.Errorf("%w: qre is required", gateway.ErrInvalid)
	}
	re, err := regexp.Compile(vals[0])
	if err != nil {
		return nil, fmt.Errorf("%w: qre: %w", gateway.ErrInvalid, err)
	}
	return re, nil
}

// pullParams reads t (seconds to wait, at most mapping.MaxSeconds; absent =
// forever) and cf.
func pullParams(r *http.Request) (time.Duration, string, error) {
	q := query(r)
	wait := time.Duration(-1)
	if vals, ok := q["t"]; ok {
		var err error
		if wait, err = mapping.ParseSeconds("t", firstOf(vals)); err != nil {
			return 0, "", fmt.Errorf("%w: %w", gateway.ErrInvalid, err)
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
