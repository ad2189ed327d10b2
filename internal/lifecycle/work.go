package lifecycle

import (
	"context"
	"sync"
	"time"
)

// Work owns the core's work that runs outside a client's request: a release
// after a client left, a drop or dead letter after a pull, a relayed reply, a
// registry lookup, an expired delivery. All of it runs under one context that
// lives as long as the gateway, is counted, and is waited for by Close, so
// that the gateway's Close returns only when nothing of the core uses
// JetStream any more (the caller closes NATS next).
//
// Close lets work already started finish (a release half done would leave a
// duplicate) for up to the grace given to New, then cancels the context:
// every piece is bounded anyway, the grace only keeps a shutdown with NATS
// gone from taking that long.
type Work struct {
	ctx    context.Context
	cancel context.CancelFunc
	grace  time.Duration

	mu     sync.RWMutex // read-held by enter (every message), held by Close
	closed bool
	wg     sync.WaitGroup
}

// New returns a Work whose Close waits up to grace before cancelling the
// work under way.
func New(grace time.Duration) *Work {
	ctx, cancel := context.WithCancel(context.Background())
	return &Work{ctx: ctx, cancel: cancel, grace: grace}
}

// Context lives until Close ends it (after the grace).
func (w *Work) Context() context.Context { return w.ctx }

// enter counts one piece of work; false once closing, when it must not start.
// (A WaitGroup must not grow from zero while Wait runs: the mutex and the
// closed flag keep every Add before Close's Wait.)
func (w *Work) enter() bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return false
	}
	w.wg.Add(1)
	return true
}

func (w *Work) leave() { w.wg.Done() }

// Go runs f on a goroutine of its own, counted; false (and f not run) when
// closing.
func (w *Work) Go(f func(ctx context.Context)) bool {
	if !w.enter() {
		return false
	}
	go func() {
		defer w.leave()
		f(w.ctx)
	}()
	return true
}

// Within runs f on the calling goroutine (a timer's, say), counted; false
// (and f not run) when closing.
func (w *Work) Within(f func(ctx context.Context)) bool {
	if !w.enter() {
		return false
	}
	defer w.leave()
	f(w.ctx)
	return true
}

// Counted wraps a handler (a NATS subscription's, say) so that each call
// counts as work: Unsubscribe does not wait for a handler already running,
// Close does. Calls once closing are ignored. (A function, not a method:
// methods cannot have type parameters.)
func Counted[M any](w *Work, h func(M)) func(M) {
	return func(m M) {
		if !w.enter() {
			return
		}
		defer w.leave()
		h(m)
	}
}

// Close stops new work, waits for the work under way (up to the grace with
// the context still live, then cancelled) and returns when all of it ended.
func (w *Work) Close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(w.grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	w.cancel()
	<-done
}
