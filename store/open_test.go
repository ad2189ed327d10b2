package store_test

import (
	"testing"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// TestOpen: a Store opened on a Bus stores and reads back; a domain and an
// API prefix together are refused.
func TestOpen(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	b := bus.New(testnats.Connect(t, ns, "open"))
	ctx := testCtx(t)
	if _, err := store.Open(b, store.Config{Domain: "d", APIPrefix: "p"}); err == nil {
		t.Fatal("Open with a domain and an API prefix")
	}
	s, err := store.Open(b, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Encode(ctx, "open", mapping.QueueSubject("open"), store.Content{Body: []byte("x")}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Shards().QueueShard(ctx, "open"); err != nil {
		t.Fatal(err)
	}
	if seq, err := s.Publish(ctx, "store message", "open", m); err != nil || seq != 1 {
		t.Fatalf("Publish: %d %v", seq, err)
	}
}
