package noise

import (
	"testing"
	"time"
)

// TestLimiterOnePerInterval: one line per kind and interval, and the next
// one let through tells how many were held back.
func TestLimiterOnePerInterval(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewLimiter(5*time.Second, func() time.Time { return now })
	if n, ok := l.Allow("a"); !ok || n != 0 {
		t.Fatalf("first line: %d, %v", n, ok)
	}
	for range 3 {
		if _, ok := l.Allow("a"); ok {
			t.Fatal("a second line within the interval")
		}
	}
	if _, ok := l.Allow("b"); !ok {
		t.Fatal("another kind was held back")
	}
	now = now.Add(5 * time.Second)
	if n, ok := l.Allow("a"); !ok || n != 3 {
		t.Fatalf("after the interval: %d held back, %v; want 3, true", n, ok)
	}
}
