package e2e

import (
	"context"
	"errors"
	"fmt"
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
