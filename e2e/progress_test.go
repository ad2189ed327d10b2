package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// A load or a recovery takes as long as the machine makes it take: a test
// of one asserts what was delivered, never how fast. What it must still
// catch is a gateway that stopped making progress, so its waits are stall
// detectors: they fail only when the count of what was achieved (messages
// received, acks answered) has not moved for a generous while, however long
// the whole takes. A wedged test still ends (go test's -timeout), and says
// what stopped moving.

// loadStall is how long a load may go without any progress before its test
// fails: well beyond a JetStream election (up to ~10 s seen), a delivery's
// timeout in these tests and a loaded machine's hiccups.
const loadStall = 60 * time.Second

// errStalled is the cause of a context ended by untilStalled.
var errStalled = errors.New("no progress")

// stallTick is how often a stall detector looks at its count.
const stallTick = 100 * time.Millisecond

// untilStalled returns a context that ends when progress() has not changed
// for stall (its cause, context.Cause, wraps errStalled and says what
// stopped), or when parent ends. The returned cancel releases it.
func untilStalled(parent context.Context, stall time.Duration, what string, progress func() int64) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		tick := time.NewTicker(stallTick)
		defer tick.Stop()
		last, since := progress(), time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if n := progress(); n != last {
				last, since = n, time.Now()
				continue
			}
			if time.Since(since) >= stall {
				cancel(fmt.Errorf("%w: %s stayed at %d for %v", errStalled, what, last, stall))
				return
			}
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// awaitProgress waits until done holds. It fails t only when progress()
// has not changed for stall meanwhile: done's last detail and the stuck
// count say where it stopped.
func awaitProgress(t testing.TB, stall time.Duration, what string, progress func() int64, done func() (bool, string)) {
	t.Helper()
	if err := progressUntil(stall, progress, done); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// progressUntil is awaitProgress for a caller that handles the failure
// itself: nil once done holds, else an error wrapping errStalled.
func progressUntil(stall time.Duration, progress func() int64, done func() (bool, string)) error {
	tick := time.NewTicker(stallTick)
	defer tick.Stop()
	last, since := progress(), time.Now()
	for {
		ok, detail := done()
		if ok {
			return nil
		}
		if n := progress(); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= stall {
			return fmt.Errorf("%w for %v (count stuck at %d; last seen: %s)", errStalled, stall, last, detail)
		}
		<-tick.C
	}
}

// TestStallDetectors: the detectors end a wait when the count stops, not
// while it moves, whatever the time the whole takes.
func TestStallDetectors(t *testing.T) {
	t.Parallel()
	const stall = 300 * time.Millisecond
	var n atomic.Int64
	moving := func() int64 { return n.Add(1) } // moves at every look
	stuck := func() int64 { return 7 }

	// Moving for several stalls' time: not stalled; done ends it.
	start := time.Now()
	if err := progressUntil(stall, moving, func() (bool, string) { return time.Since(start) > 3*stall, "" }); err != nil {
		t.Fatalf("a moving count: %v", err)
	}
	if err := progressUntil(stall, stuck, func() (bool, string) { return false, "never" }); !errors.Is(err, errStalled) {
		t.Fatalf("a stuck count: %v, want errStalled", err)
	}

	ctx, cancel := untilStalled(context.Background(), stall, "test count", stuck)
	defer cancel()
	<-ctx.Done()
	if err := context.Cause(ctx); !errors.Is(err, errStalled) {
		t.Fatalf("untilStalled on a stuck count: %v, want errStalled", err)
	}
	ctx2, cancel2 := untilStalled(context.Background(), stall, "test count", moving)
	select {
	case <-ctx2.Done():
		t.Fatalf("untilStalled ended on a moving count: %v", context.Cause(ctx2))
	case <-time.After(3 * stall): // negative: nothing must happen meanwhile
	}
	cancel2()
	if err := context.Cause(ctx2); errors.Is(err, errStalled) {
		t.Fatalf("cancelled: %v", err)
	}
}
