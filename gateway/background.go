package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// background owns the core's work that runs outside a client's request: a
// release after a client left, a drop or dead letter after a pull, a relayed
// reply, a registry lookup, an expired delivery. All of it runs under one
// context that lives as long as the gateway, is counted, and is waited for by
// Gateway.Close, so that Close returns only when nothing of the core uses
// JetStream any more (the caller closes NATS next).
//
// Close lets work already started finish (a release half done would leave a
// duplicate) for up to closeGrace, then cancels the context: every piece is
// bounded by opTimeout anyway, the grace only keeps a shutdown with NATS gone
// from taking that long.
type background struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.RWMutex // read-held by enter (every message), held by close
	closed bool
	wg     sync.WaitGroup
}

// closeGrace is how long Close waits for background work before cancelling it.
const closeGrace = 2 * time.Second

func newBackground() *background {
	ctx, cancel := context.WithCancel(context.Background())
	return &background{ctx: ctx, cancel: cancel}
}

// enter counts one piece of work; false once closing, when it must not start.
// (A WaitGroup must not grow from zero while Wait runs: the mutex and the
// closed flag keep every Add before close's Wait.)
func (b *background) enter() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	return true
}

func (b *background) leave() { b.wg.Done() }

// close stops new work, waits for the work under way (up to closeGrace with
// the context still live, then cancelled) and returns when all of it ended.
func (b *background) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	done := make(chan struct{})
	go func() {
		b.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	b.cancel()
	<-done
}

// spawn runs f on a goroutine of its own, counted; false (and f not run) when
// the gateway is closing. A message left unhandled that way stays pending in
// JetStream and comes back after the consumer's AckWait, as Close documents.
func (g *Gateway) spawn(f func(ctx context.Context)) bool {
	if !g.work.enter() {
		return false
	}
	go func() {
		defer g.work.leave()
		f(g.work.ctx)
	}()
	return true
}

// within runs f on the calling goroutine (a timer's), counted; false (and f
// not run) when the gateway is closing.
func (g *Gateway) within(f func(ctx context.Context)) bool {
	if !g.work.enter() {
		return false
	}
	defer g.work.leave()
	f(g.work.ctx)
	return true
}

// counted wraps a subscription's handler so that it counts as background
// work: Unsubscribe does not wait for a handler already running, Close does.
// Messages arriving once the gateway is closing are ignored.
func (g *Gateway) counted(h nats.MsgHandler) nats.MsgHandler {
	return func(m *nats.Msg) {
		if !g.work.enter() {
			return
		}
		defer g.work.leave()
		h(m)
	}
}

// opContext bounds one background JetStream operation: opTimeout, and the
// gateway's lifetime.
func (g *Gateway) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(g.work.ctx, opTimeout)
}
