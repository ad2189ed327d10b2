package httpapi

import (
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// TestPushOptionAnswers pins the answers to push options over HTTP: what
// reaches the core from each, and the 400 of each refusal, word for word.
func TestPushOptionAnswers(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	three := 3
	for _, c := range []struct {
		query, key string
		want       gateway.PushOptions
	}{
		{"", "", gateway.PushOptions{}},
		{"delay=&ttl=&priority=", "", gateway.PushOptions{}},
		{"delay=0.25&ttl=1e3", "", gateway.PushOptions{Delay: 250 * time.Millisecond, TTL: 1000 * time.Second}},
		{"ttl=315360000", "", gateway.PushOptions{TTL: 315360000 * time.Second}},
		{"priority=3", "k", gateway.PushOptions{Priority: &three, IdempotencyKey: "k"}},
		{"group=g&group=h", "", gateway.PushOptions{Group: "g"}},
	} {
		s.do("POST", "/messages/o?"+c.query, "x", "Idempotency-Key", c.key).want(t, c.query, 200, `{"accum":"no"}`)
		got := s.core.LastOptions()
		if got.Delay != c.want.Delay || got.TTL != c.want.TTL || got.Group != c.want.Group || got.IdempotencyKey != c.want.IdempotencyKey ||
			(got.Priority == nil) != (c.want.Priority == nil) || got.Priority != nil && *got.Priority != *c.want.Priority {
			t.Errorf("%s: options %+v, want %+v", c.query, got, c.want)
		}
	}
	const secs = "must be a number of seconds from 0 to 315360000 (10 years)"
	for q, want := range map[string]string{
		"delay=x":          "invalid request: delay " + secs,
		"delay=-1":         "invalid request: delay " + secs,
		"ttl=1e300":        "invalid request: ttl " + secs,
		"ttl=NaN":          "invalid request: ttl " + secs,
		"priority=10":      "invalid request: priority must be an integer from 0 to 9",
		"priority=%2B1":    "invalid request: priority must be an integer from 0 to 9",
		"priority=1.0":     "invalid request: priority must be an integer from 0 to 9",
		"group=":           "invalid request: group must not be empty",
		"delay=-1&ttl=-1":  "invalid request: delay " + secs,
		"ttl=x&priority=x": "invalid request: ttl " + secs,
	} {
		s.do("POST", "/messages/o?"+q, "x").want(t, q, 400, `{"error":"`+want+`"}`)
	}
}
