package gateway_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// TestScopeNarrowsMatching: the operations that match queue names by a
// regular expression, and the listing, see only the queues of the scope
// they are given (a token's, package auth), and every queue without one.
func TestScopeNarrowsMatching(t *testing.T) {
	t.Parallel()
	g := newCore(t)
	ctx := t.Context()
	for _, q := range []string{"sc/a.1", "sc/a.2", "sc/b.1"} {
		mustPush(t, g, q, "x")
	}
	onlyA := gateway.Scope(func(q string) bool { return strings.HasPrefix(q, "sc/a.") })
	re := regexp.MustCompile(`^sc/`)

	res, err := g.Messages().PushAll(ctx, re, gateway.Message{Body: []byte("y")}, onlyA)
	if err != nil || len(res) != 2 || res["sc/b.1"] != "" {
		t.Fatalf("push-all in scope: %v %v", res, err)
	}
	all, err := g.Inspect().QueueStatuses(ctx, onlyA)
	if err != nil || len(all) != 2 || all[0].Name != "sc/a.1" || all[1].Name != "sc/a.2" {
		t.Fatalf("statuses in scope: %+v %v", all, err)
	}
	if all, err = g.Inspect().QueueStatuses(ctx, nil); err != nil || len(all) != 3 {
		t.Fatalf("statuses without a scope: %+v %v", all, err)
	}
	onlyB := gateway.Scope(func(q string) bool { return q == "sc/b.1" })
	d, err := g.Messages().PullAny(ctx, re, 0, onlyB)
	if err != nil || d == nil || d.Queue != "sc/b.1" {
		t.Fatalf("pull-any in scope: %+v %v", d, err)
	}
	if err := g.Messages().Reply(ctx, d.Queue, d.ID, gateway.Ack); err != nil {
		t.Fatal(err)
	}
	if d, err := g.Messages().PullAny(ctx, re, 0, onlyB); d != nil || err != nil {
		t.Fatalf("pull-any of an empty scope: %+v %v", d, err)
	}
}
