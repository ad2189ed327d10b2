package wakeups

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/noise"
)

// TestMergedAndExact: wake-ups of a target in one slot are merged, exact
// ones are not, and each pending one fires once.
func TestMergedAndExact(t *testing.T) {
	fired := make(chan string, 8)
	w := New(func(s string) { fired <- s }, slog.Default(), noise.NewLimiter(time.Second, nil))
	past := time.Now().Add(-time.Second)
	w.AtSlot("a", past)
	w.AtSlot("a", past) // the same slot: merged
	w.At("b", past)
	w.At("b", past)
	if n := len(w.h); n != 3 {
		t.Fatalf("%d pending, want 3 (one merged, two exact)", n)
	}
	w.TestFired.Init(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	got := map[string]int{}
	for range 3 {
		got[<-fired]++
	}
	// Each fired wake-up is signalled once fire returned.
	signalled := w.TestFired.WaitN(3, "three wake-ups signalled", func(string) bool { return true })
	cancel()
	<-done
	if got["a"] != 1 || got["b"] != 2 || len(fired) != 0 {
		t.Fatalf("fired %v (+%d more), want a once, b twice", got, len(fired))
	}
	w.TestFired.RequireEmpty()
	if slices.Sort(signalled); !slices.Equal(signalled, []string{"a", "b", "b"}) {
		t.Fatalf("signalled %v, want a once, b twice", signalled)
	}
	if len(w.set) != 0 {
		t.Fatalf("merged wake-ups left after firing: %v", w.set)
	}
}
