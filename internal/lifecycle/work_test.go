package lifecycle

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestCloseWaitsThenCancels: Close waits for work under way, cancels what
// outlives the grace, and refuses work once closing.
func TestCloseWaitsThenCancels(t *testing.T) {
	w := New(time.Millisecond)
	var finished, handled atomic.Int32
	started := make(chan struct{})
	if !w.Go(func(ctx context.Context) {
		close(started)
		<-ctx.Done() // ends only when Close cancels it, after the grace
		finished.Add(1)
	}) {
		t.Fatal("Go refused before Close")
	}
	<-started
	h := Counted(w, func(int) { handled.Add(1) })
	h(1)
	w.Close()
	if finished.Load() != 1 {
		t.Fatal("Close returned before the work ended")
	}
	if w.Go(func(context.Context) {}) || w.Within(func(context.Context) {}) {
		t.Fatal("work started after Close")
	}
	h(2)
	if handled.Load() != 1 {
		t.Fatalf("handled %d calls, want the one before Close", handled.Load())
	}
}
