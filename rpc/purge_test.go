package rpc

import "testing"

// TestFakePurge: purge(name) answers "ok" and empties the queue; an unknown
// queue is not_found, bad arguments badarg.
func TestFakePurge(t *testing.T) {
	t.Parallel()
	c, _ := startFake(t, Options{})
	c.ok("ok", "push", "pq", "x")
	c.ok("ok", "purge", "pq")
	c.ok("empty", "pull", "pq", 0)
	c.failAll([]badCall{
		{"purge", []any{"never-existed"}, "not_found"},
		{"purge", []any{}, "badarg"},
		{"purge", []any{1}, "badarg"},
		{"purge", []any{"pq", "x"}, "badarg"},
	})
	c.ok("ok", "push", "pq", "still working")
}
