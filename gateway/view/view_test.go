package view_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/gateway/view"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// testCtx bounds a test's requests; reached only on failure.
func testCtx(t *testing.T) context.Context { return testnats.Context(t) }

// fixture is a Reader on a store of a fresh embedded server, whose queues
// are those given (the core's registry, as far as the views can tell).
type fixture struct {
	s  *store.Store
	r  *view.Reader
	js jetstream.JetStream
}

func newFixture(t *testing.T, queues ...string) *fixture {
	t.Helper()
	nc, js := testnats.Client(t, "view-test")
	s := store.New(nc, js, store.Config{})
	exists := make(map[string]bool)
	for _, q := range queues {
		exists[q] = true
	}
	r := view.New(view.Core{
		Store: s,
		Shard: func(ctx context.Context, queue string) (*store.Shard, error) {
			if !exists[queue] {
				return nil, fmt.Errorf("queue %q: %w", queue, store.ErrNotFound)
			}
			return s.Shards().QueueShard(ctx, queue)
		},
		Names: func() []string { return queues },
		Props: func(string) mapping.Effective { return mapping.Effective{Retry: 4} },
	})
	return &fixture{s: s, r: r, js: js}
}

// put stores body on queue's subject as a push would.
func (f *fixture) put(t *testing.T, queue, subject, body string, hdr map[string]string) {
	t.Helper()
	ctx := testCtx(t)
	m, err := f.s.Encode(ctx, queue, subject, store.Content{ContentType: "text/plain", Body: []byte(body)}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	if _, err := f.s.Publish(ctx, "test", queue, m); err != nil {
		t.Fatal(err)
	}
}

func bodies(ps []view.Peeked) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p.Body)
	}
	return out
}

// TestPeekInPullOrder: Peek shows the waiting messages highest priority
// first, each level in stream order, without taking them (a second look
// sees the same); dead letters are only in PeekDead and DeadHead; Status
// counts them by kind.
func TestPeekInPullOrder(t *testing.T) {
	const q = "jobs"
	f := newFixture(t, q)
	ctx := testCtx(t)
	f.put(t, q, mapping.QueueSubject(q), "low1", nil)
	f.put(t, q, mapping.PrioritySubject(q, 3), "high", nil)
	f.put(t, q, mapping.QueueSubject(q), "low2", nil)
	died := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	f.put(t, q, mapping.DeadSubject(q), "dead", map[string]string{
		mapping.HdrDelivered: "3", mapping.HdrDeadAt: died.Format(time.RFC3339Nano)})

	for range 2 {
		ps, err := f.r.Peek(ctx, q, 10)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(bodies(ps)); got != "[high low1 low2]" {
			t.Fatalf("Peek: %s", got)
		}
		if ps[0].Priority != 3 || ps[1].Priority != 0 || ps[0].Retry != 2 || ps[0].PushedAt.IsZero() || ps[0].ContentType != "text/plain" {
			t.Fatalf("Peek's first two: %+v, %+v", ps[0], ps[1])
		}
	}
	if ps, err := f.r.Peek(ctx, q, 1); err != nil || len(ps) != 1 || string(ps[0].Body) != "high" {
		t.Fatalf("Peek 1: %v, %v", bodies(ps), err)
	}
	dead, err := f.r.PeekDead(ctx, q, 10)
	if err != nil || fmt.Sprint(bodies(dead)) != "[dead]" || dead[0].Delivered != 3 || !dead[0].DiedAt.Equal(died) {
		t.Fatalf("PeekDead: %+v, %v", dead, err)
	}
	head, err := f.r.DeadHead(ctx, q)
	if err != nil || head == nil || string(head.Content.Body) != "dead" || head.Deliveries != 3 || !head.DiedAt.Equal(died) {
		t.Fatalf("DeadHead: %+v, %v", head, err)
	}
	if oldest, err := f.r.OldestWaiting(ctx, q); err != nil || oldest.IsZero() || !oldest.Before(time.Now()) {
		t.Fatalf("OldestWaiting: %v, %v", oldest, err)
	}

	s, err := f.r.Status(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != q || s.Size != 3 || s.DeadLetters != 1 || s.InFlight != 0 || s.Bytes == 0 || s.Props.Retry != 4 {
		t.Fatalf("Status: %+v", s)
	}
	all, err := f.r.Statuses(ctx, nil)
	if err != nil || len(all) != 1 || all[0].Size != s.Size || all[0].DeadLetters != s.DeadLetters || all[0].Bytes != s.Bytes {
		t.Fatalf("Statuses: %+v, %v", all, err)
	}
	if none, err := f.r.Statuses(ctx, func(string) bool { return false }); err != nil || len(none) != 0 {
		t.Fatalf("Statuses of an empty scope: %+v, %v", none, err)
	}
}

// TestViewsOfNoQueue: every view of a queue the core does not know answers
// the core's not-found error; an existing queue without dead letters has
// no dead head.
func TestViewsOfNoQueue(t *testing.T) {
	f := newFixture(t, "empty")
	ctx := testCtx(t)
	if _, err := f.r.Peek(ctx, "none", 5); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Peek: %v", err)
	}
	if _, err := f.r.Status(ctx, "none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Status: %v", err)
	}
	if _, err := f.r.DeadHead(ctx, "none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeadHead: %v", err)
	}
	if head, err := f.r.DeadHead(ctx, "empty"); head != nil || err != nil {
		t.Fatalf("DeadHead of a queue without dead letters: %+v, %v", head, err)
	}
	if ps, err := f.r.Peek(ctx, "empty", 5); err != nil || len(ps) != 0 {
		t.Fatalf("Peek of an empty queue: %+v, %v", ps, err)
	}
}
