package rpc

import (
	"testing"
)

// TestFakeMessages: messages lists the waiting messages as maps (content
// only with {body: true}); delete_message removes one by id, then answers
// not_found; bad arguments are badarg.
func TestFakeMessages(t *testing.T) {
	t.Parallel()
	c, _ := startFake(t, Options{})
	c.ok("ok", "push", "w", "one")
	c.ok("ok", "push", "w", "two")

	list, ok := c.call("messages", "w").value(t).([]any)
	if !ok || len(list) != 2 {
		t.Fatalf("messages: %#v", list)
	}
	first, _ := list[0].(map[string]any)
	if first["id"] != int8(1) || first["content_type"] != "application/x-msgpack" || first["priority"] != int8(0) {
		t.Fatalf("first: %#v", first)
	}
	if _, has := first["content"]; has {
		t.Fatalf("content without body: %#v", first)
	}
	list, _ = c.call("messages", "w", 1, map[string]any{"body": true}).value(t).([]any)
	if len(list) != 1 || list[0].(map[string]any)["content"] != "one" || list[0].(map[string]any)["truncated"] != false {
		t.Fatalf("messages with body: %#v", list)
	}

	c.ok("ok", "delete_message", "w", 1)
	if e := c.fails("delete_message", "w", 2); e != "not_found" {
		t.Fatalf("delete gone: %q", e)
	}
	c.ok("ok", "delete_message", "w", "1") // the id as text
	c.ok("ok", "push", "w", "three")
	c.ok("ok", "move_message", "w", 1, "w2")
	if e := c.fails("move_message", "w", 1, "w2"); e != "not_found" {
		t.Fatalf("move gone: %q", e)
	}
	if list, _ := c.call("messages", "w2").value(t).([]any); len(list) != 1 {
		t.Fatalf("messages of the target: %#v", list)
	}
	if e := c.fails("messages", "none"); e != "not_found" {
		t.Fatalf("messages of no queue: %q", e)
	}
	c.failAll([]badCall{
		{"messages", []any{}, "badarg"},
		{"messages", []any{"w", 0}, "badarg"},
		{"messages", []any{"w", 51}, "badarg"},
		{"messages", []any{"w", "ten"}, "badarg"},
		{"messages", []any{"w", 1.5}, "badarg"},
		{"messages", []any{"w", 1, map[string]any{"bodies": true}}, "badarg"},
		{"messages", []any{"w", 1, map[string]any{"body": 1}}, "badarg"},
		{"messages", []any{"w", 1, "body"}, "badarg"},
		{"delete_message", []any{"w"}, "badarg"},
		{"delete_message", []any{"w", 0}, "badarg"},
		{"delete_message", []any{"w", -1}, "badarg"},
		{"delete_message", []any{"w", 1.5}, "badarg"},
		{"delete_message", []any{"w", "x"}, "badarg"},
		{"delete_message", []any{"w", []any{1}}, "badarg"},
		{"move_message", []any{"w", 1}, "badarg"},
		{"move_message", []any{"w", 0, "w2"}, "badarg"},
		{"move_message", []any{"w", 1, 2}, "badarg"},
	})
}
