package rpc

import (
	"testing"
	"time"
)

// TestPushOptionAnswers pins the answers to push options over RPC: what
// reaches the core from each, and each refusal, word for word.
func TestPushOptionAnswers(t *testing.T) {
	t.Parallel()
	c, core := startFake(t, Options{})
	c.ok("ok", "push", "q", "x", map[string]any{"delay": 0.25, "ttl": uint64(1000), "priority": 3, "group": "g", "idempotency_key": []byte("k")})
	o := core.LastOptions()
	if o.Delay != 250*time.Millisecond || o.TTL != 1000*time.Second || o.Priority == nil || *o.Priority != 3 || o.Group != "g" || o.IdempotencyKey != "k" {
		t.Errorf("options %+v", o)
	}
	c.ok("ok", "push", "q", "x", map[string]any{"priority": uint64(9), "group": []byte("h"), "idempotency_key": "k2", "ttl": float32(2)})
	if o := core.LastOptions(); o.Priority == nil || *o.Priority != 9 || o.Group != "h" || o.IdempotencyKey != "k2" || o.TTL != 2*time.Second {
		t.Errorf("options %+v", o)
	}
	c.ok("ok", "push", "q", "x", map[string]any{})
	if o := core.LastOptions(); o.Priority != nil || o.Delay != 0 || o.Group != "" {
		t.Errorf("no options: %+v", o)
	}
	const secs = "must be a number of seconds from 0 to 315360000 (10 years)"
	for _, bc := range []struct {
		opts any
		want string
	}{
		{"delay", "badarg: push options must be a map"},
		{map[string]any{"delay": "1"}, "badarg: push option delay must be a non-negative number of seconds"},
		{map[string]any{"ttl": nil}, "badarg: push option ttl must be a non-negative number of seconds"},
		{map[string]any{"delay": -1}, "badarg: push option delay " + secs},
		{map[string]any{"ttl": 1e10}, "badarg: push option ttl " + secs},
		{map[string]any{"priority": 10}, "badarg: push option priority must be an integer from 0 to 9"},
		{map[string]any{"priority": -1}, "badarg: push option priority must be an integer from 0 to 9"},
		{map[string]any{"priority": uint64(1 << 63)}, "badarg: push option priority must be an integer from 0 to 9"},
		{map[string]any{"priority": 1.0}, "badarg: push option priority must be an integer from 0 to 9"},
		{map[string]any{"priority": "1"}, "badarg: push option priority must be an integer from 0 to 9"},
		{map[string]any{"group": 7}, "badarg: push option group must be a string"},
		{map[string]any{"group": ""}, "badarg: push option group must not be empty"},
		{map[string]any{"group": []byte{}}, "badarg: push option group must not be empty"},
		{map[string]any{"idempotency_key": 17}, "badarg: push option idempotency_key must be a string"},
		{map[string]any{"colour": 1}, "badarg: unknown push option colour (known: delay, ttl, idempotency_key, priority, group)"},
	} {
		if got := c.fails("push", "q", "x", bc.opts); got != bc.want {
			t.Errorf("push with %v: %q, want %q", bc.opts, got, bc.want)
		}
	}
}
