package dispatch

import (
	"bytes"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// TestNotifyPayload: a notification's payload names the sender and the
// priority, and one of an older version (the bare id) names no priority.
func TestNotifyPayload(t *testing.T) {
	t.Parallel()
	nc := testnats.Connect(t, testnats.Start(t), "notify")
	id := []byte{1, 2, 3, 4}
	d := New(Config{Bus: bus.New(nc), ID: id, RepollInterval: time.Second})
	for p := 0; p <= mapping.MaxPriority; p++ {
		got, gotP := parseNotifyPayload(d.notifyPayload(p), len(id))
		if !bytes.Equal(got, id) || gotP != p {
			t.Fatalf("priority %d: parsed as %x, %d", p, got, gotP)
		}
	}
	// Out of range: sent as the bare id.
	if got := d.notifyPayload(mapping.MaxPriority + 1); !bytes.Equal(got, id) {
		t.Fatalf("priority beyond the maximum sent as %x", got)
	}
	// Another gateway's id, of an older version: no priority.
	other := []byte{9, 9, 9, 9}
	if got, p := parseNotifyPayload(other, len(id)); !bytes.Equal(got, other) || p != 0 {
		t.Fatalf("older payload parsed as %x, %d", got, p)
	}
}
