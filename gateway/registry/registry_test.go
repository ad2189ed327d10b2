package registry_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/gateway/registry"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// testCtx bounds a test's requests; reached only on failure.
func testCtx(t *testing.T) context.Context { return testnats.Context(t) }

// server is an embedded nats-server and a JetStream client on it.
type server struct {
	nc *nats.Conn
	js jetstream.JetStream
	st *store.Store
}

func newServer(t *testing.T) *server {
	t.Helper()
	nc, js := testnats.Client(t, "registry-test")
	return &server{nc: nc, js: js, st: store.New(nc, js, store.Config{})}
}

// drops records the queues a registry dropped (Config.OnDrop).
type drops struct {
	mu    sync.Mutex
	names []string
}

func (d *drops) onDrop(queue string) func() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.names = append(d.names, queue)
	return nil
}

func (d *drops) has(queue string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Contains(d.names, queue)
}

// open opens a registry on s, stopped when the test ends.
func (s *server) open(t *testing.T, maxQueues int, d *drops) *registry.Registry {
	t.Helper()
	cfg := registry.Config{Store: s.st, MaxQueues: maxQueues, Logger: slog.New(slog.DiscardHandler)}
	if d != nil {
		cfg.OnDrop = d.onDrop
	}
	r := registry.New(cfg)
	if err := r.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// TestReserveBound: Reserve keeps the queues within MaxQueues, counting
// those being created; a queue that exists needs no place, and
// reservations of one name share a place until released.
func TestReserveBound(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := testCtx(t)
	r := s.open(t, 3, nil)
	for _, q := range []string{"a", "b"} {
		release, err := r.Reserve(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Register(ctx, q); err != nil {
			t.Fatal(err)
		}
		release()
	}
	relC1, err := r.Reserve(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	relC2, err := r.Reserve(ctx, "c")
	if err != nil {
		t.Fatalf("second reservation of the same queue: %v", err)
	}
	if n := r.Count(); n != 3 {
		t.Fatalf("Count = %d with two queues and one being created; want 3", n)
	}
	if _, err := r.Reserve(ctx, "d"); !errors.Is(err, registry.ErrTooManyQueues) {
		t.Fatalf("Reserve beyond the bound: %v; want ErrTooManyQueues", err)
	}
	if release, err := r.Reserve(ctx, "a"); err != nil {
		t.Fatalf("Reserve of an existing queue at the bound: %v", err)
	} else {
		release()
	}
	relC1()
	relC1() // a release is idempotent: it must not free relC2's share
	if _, err := r.Reserve(ctx, "d"); !errors.Is(err, registry.ErrTooManyQueues) {
		t.Fatalf("Reserve while one reservation of c is held: %v; want ErrTooManyQueues", err)
	}
	relC2()
	release, err := r.Reserve(ctx, "d")
	if err != nil {
		t.Fatalf("Reserve once the reservations are released: %v", err)
	}
	release()
}

// TestAcrossRegistries: two gateways' registries on one JetStream see each
// other's queues; a deletion through one drops the queue in both (OnDrop),
// and a second deletion answers ErrNotFound.
func TestAcrossRegistries(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := testCtx(t)
	var d1, d2 drops
	r1, r2 := s.open(t, 0, &d1), s.open(t, 0, &d2)
	applied := r2.TestApplied()
	applied.Init(t)
	if err := r1.Register(ctx, "shared"); err != nil {
		t.Fatal(err)
	}
	if ok, err := r2.Exists(ctx, "shared"); err != nil || !ok {
		t.Fatalf("Exists on the other registry: %v, %v", ok, err)
	}
	applied.WaitUntil("the other registry to list the queue", func() bool {
		return slices.Equal(r2.Names(), []string{"shared"})
	})
	if err := r1.Delete(ctx, "shared"); err != nil {
		t.Fatal(err)
	}
	if r1.Known("shared") || !d1.has("shared") {
		t.Fatalf("after Delete: known %v, dropped %v", r1.Known("shared"), d1.has("shared"))
	}
	applied.WaitUntil("the other registry to drop the queue", func() bool {
		return d2.has("shared") && !r2.Known("shared")
	})
	if err := r2.Delete(ctx, "shared"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second Delete: %v; want ErrNotFound", err)
	}
	if ok, err := r2.Exists(ctx, "shared"); err != nil || ok {
		t.Fatalf("Exists after Delete: %v, %v", ok, err)
	}
}

// TestAdopt: a queue holding messages without a registry key (published by
// a NATS program straight into its subject) is registered at Start, even
// beyond MaxQueues.
func TestAdopt(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := testCtx(t)
	if _, err := s.st.Shards().QueueShard(ctx, "orphan"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.js.Publish(ctx, mapping.QueueSubject("orphan"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	r := s.open(t, 1, nil)
	if !r.Known("orphan") {
		t.Fatalf("orphan not adopted; known: %v", r.Names())
	}
	kv, err := s.js.KeyValue(ctx, mapping.QueuesBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, mapping.EncodeName("orphan")); err != nil {
		t.Fatalf("adopted queue's key: %v", err)
	}
	if got := r.Matching(func(q string) bool { return q == "orphan" }); !slices.Equal(got, []string{"orphan"}) {
		t.Fatalf("Matching = %v", got)
	}
}
