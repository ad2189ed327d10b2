package rpc

import (
	"math"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Every duration over RPC (pull timeout, push options delay and ttl, the
// accum, timeout and ttl properties) is at most mapping.MaxSeconds (10 years);
// beyond it, or negative, NaN or infinite, the call fails naming the value and
// the range. Before, a huge pull timeout meant "forever", and huge properties
// overflowed past the year 2262.
func TestFakeDurationLimits(t *testing.T) {
	t.Parallel()
	c, core := startFake(t, Options{})

	c.failAll([]badCall{
		{"pull", []any{"q", 1e10}, "badarg: timeout must be a number of seconds from 0 to 315360000"},
		{"pull", []any{"q", uint64(9000000000)}, "badarg: timeout must be"},
		{"pull", []any{"q", float64(mapping.MaxSeconds) + 0.5}, "badarg: timeout must be"},
		{"pull", []any{"q", math.Inf(1)}, "badarg: timeout must be"},
		{"pull", []any{"q", math.NaN()}, "badarg: timeout must be"},
		{"pull", []any{"q", -0.5}, "badarg: timeout must be"},
		{"pull_any", []any{"q", 1e10}, "badarg: timeout must be"},
		{"push", []any{"q", "x", map[string]any{"delay": 9e9}}, "badarg: push option delay must be a number of seconds from 0 to 315360000"},
		{"push", []any{"q", "x", map[string]any{"ttl": 1e10}}, "badarg: push option ttl must be"},
		{"push", []any{"q", "x", map[string]any{"ttl": int64(-1)}}, "badarg: push option ttl must be"},
		{"push", []any{"q", "x", map[string]any{"delay": math.NaN()}}, "badarg: push option delay must be"},
		{"update_props", []any{"q", map[string]any{"accum": 8e9}}, "invalid_props: invalid properties: accum must be a number of seconds from 0 to 315360000"},
		{"update_props", []any{"q", map[string]any{"pack": uint64(1e10)}}, "invalid_props: invalid properties: pack must be"},
		{"update_props", []any{"q", map[string]any{"ttl": 1e10}}, "invalid_props: invalid properties: ttl must be"},
		{"update_props", []any{"q", map[string]any{"timeout": math.Inf(1)}}, "invalid_props: invalid properties: timeout must be"},
		{"set_default_props", []any{[]any{[]any{".*", map[string]any{"ttl": 9e9}}}}, "invalid_props: invalid properties: default list entry 1: ttl must be"},
	})
	pushes := core.Pushes()
	props, defaults := core.PropsSet()
	if pushes != 0 || props != 0 || defaults != 0 {
		t.Fatalf("refused calls changed the core: %d pushes, %d props, %d defaults", pushes, props, defaults)
	}

	// The largest accepted values still work.
	c.ok("ok", "push", "q", "x", map[string]any{"delay": 0, "ttl": uint64(mapping.MaxSeconds)})
	c.ok("ok", "update_props", "q", map[string]any{"accum": uint64(mapping.MaxSeconds), "timeout": float64(mapping.MaxSeconds), "ttl": mapping.MaxSeconds})
	if d := c.call("pull", "q", float64(mapping.MaxSeconds)).delivery(t); d.Content != "x" {
		t.Fatalf("pull with the largest timeout: %+v", d)
	}
	c.ok("empty", "pull", "q", 0)
}

// The same limits on a real core, where the overflows used to happen: the
// refused calls store nothing, and a message with the largest ttl is
// delivered.
func TestIntegrationDurationLimits(t *testing.T) {
	t.Parallel()
	c, _, _ := startReal(t, Options{})
	c.fails("push", "lim", "never", map[string]any{"ttl": 1e10})
	c.fails("push", "lim", "at once", map[string]any{"delay": 9e9})
	c.fails("update_props", "lim", map[string]any{"accum": 8e9})
	c.fails("update_props", "lim", map[string]any{"ttl": 1e10})
	c.fails("pull", "lim", 1e10)
	c.ok("empty", "pull", "lim", 0)

	c.ok("ok", "update_props", "lim", map[string]any{"ttl": mapping.MaxSeconds, "timeout": mapping.MaxSeconds})
	c.ok("ok", "push", "lim", "kept")
	c.ok("ok", "push", "lim", "own ttl", map[string]any{"ttl": mapping.MaxSeconds})
	for _, want := range []string{"kept", "own ttl"} {
		d := c.call("pull", "lim", float64(mapping.MaxSeconds)).delivery(t)
		if d.Content != want {
			t.Fatalf("pull: %+v, want %q", d, want)
		}
		c.ok("ok", "done", "lim", d.ID)
	}
}
