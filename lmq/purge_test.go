package lmq_test

import (
	"errors"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/lmq"
)

// TestPurge: Purge empties a queue and keeps it; a delivery in flight at the
// purge can still be acked; an unknown queue is ErrNotFound.
func TestPurge(t *testing.T) {
	qs := open(t)
	ctx := t.Context()
	for _, b := range []string{"a", "b", "c"} {
		if err := qs.Push(ctx, "purged", []byte(b), nil); err != nil {
			t.Fatal(err)
		}
	}
	d, err := qs.Pull(ctx, "purged")
	if err != nil {
		t.Fatal(err)
	}
	if err := qs.Purge(ctx, "purged"); err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("ack of a delivery in flight at the purge: %v", err)
	}
	if err := qs.Push(ctx, "purged", []byte("after"), nil); err != nil {
		t.Fatal(err)
	}
	d, err = qs.Pull(ctx, "purged")
	if err != nil || string(d.Message.Body) != "after" {
		t.Fatalf("pull after the purge: %+v %v", d, err)
	}
	if err := qs.Purge(ctx, "never-existed"); !errors.Is(err, lmq.ErrNotFound) {
		t.Fatalf("purge of an unknown queue: %v, want ErrNotFound", err)
	}
}
