package testwait

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilHolds(t *testing.T) {
	var n atomic.Int32
	if !Until(time.Minute, func() bool { return n.Add(1) >= 3 }) {
		t.Fatal("Until: false, want true")
	}
	if n.Load() != 3 {
		t.Fatalf("polled %d times, want 3", n.Load())
	}
}

func TestUntilBound(t *testing.T) {
	if Until(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("Until: true for a condition that never holds")
	}
}

func TestForPasses(t *testing.T) {
	For(t, "at once", func() bool { return true })
	ForDetail(t, "at once", func() (bool, string) { return true, "" })
	Within(t, time.Minute, "at once", func() bool { return true })
}
