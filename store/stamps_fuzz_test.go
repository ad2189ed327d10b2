package store_test

import (
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// FuzzReadStamps feeds arbitrary values to the headers the gateway reads back
// from stored messages: every value read is in range or reads as absent, so
// that retry and delivery counts cannot wrap around.
func FuzzReadStamps(f *testing.F) {
	f.Add("1", "2", "1700000000000000000", "1700000000000000000")
	f.Add("-1", "-5", "-1", "-9223372036854775808")
	f.Add("9223372036854775807", "9223372036854775807", "x", "1e9")
	f.Add("2147483647", "2147483646", "", "0")
	f.Fuzz(func(t *testing.T, delivered, retry, pushed, expires string) {
		h := nats.Header{}
		h.Set(mapping.HdrDelivered, delivered)
		h.Set(mapping.HdrRetry, retry)
		h.Set(mapping.HdrPushedAt, pushed)
		h.Set(mapping.HdrExpires, expires)
		s := store.ReadStamps(h)
		if s.Delivered < 0 || s.Delivered > store.MaxDeliveries {
			t.Fatalf("delivered %d from %q", s.Delivered, delivered)
		}
		if s.Retry < -1 || s.Retry > mapping.MaxRetry {
			t.Fatalf("retry %d from %q", s.Retry, retry)
		}
		if s.PushedAt < 0 {
			t.Fatalf("pushed %d from %q", s.PushedAt, pushed)
		}
		// The sums deliver and release compute stay far from overflowing.
		if left := s.Retry + 1 - (s.Delivered + 1<<20); left > 1<<31 || left < -(1<<33) {
			t.Fatalf("retries left %d", left)
		}
		// What the gateway wrote reads back unchanged.
		if n, err := strconv.Atoi(retry); err == nil && n >= 0 && n <= mapping.MaxRetry && s.Retry != n {
			t.Fatalf("retry %q read as %d", retry, s.Retry)
		}
	})
}
