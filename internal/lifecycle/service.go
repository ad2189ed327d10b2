// Package lifecycle is how every long-lived part of lmq-gateway starts and
// stops: one contract (Service), a list of services started in order and
// stopped in reverse (Group), and the work a service runs outside a
// client's request, counted and waited for (Work).
//
// The contract: Start(ctx) starts the service, ctx bounding the start only
// (the service then runs until Stop, not until ctx ends: a start is
// bounded by a deadline that must not end the service's life). A Start that
// fails leaves nothing running. Stop ends what Start started and returns
// only when every goroutine of the service ended, so that its owner may
// close what the service used (the NATS connection) right after.
//
// Why Stop takes no context: Stop must not return before the service's
// goroutines ended (a goroutine left running would use NATS after it was
// closed), so a caller's deadline could not shorten it anyway. A service
// whose stop waits on something that may hang bounds that wait itself, with
// a grace of its own that says what happens when it runs out (Work.Close:
// cancel the work; StatsD: give up the last flush). The one wait whose bound
// belongs to the caller is the drain of the front ends' requests in flight,
// which is not a stop but a step before it (package server's Shutdown).
//
// Why one undo path: a Group starts its services in order and, when one
// fails to start, stops those already started in reverse order before it
// returns the error; the later ones are never started. Stopping the group
// stops every started service in reverse order too. So a constructor built
// on a Group has one place that undoes a partial start, the same one that
// stops a whole one, and each service's Stop may rely on everything started
// before it still running.
package lifecycle

import (
	"context"
	"sync"
)

// Service is a long-lived part of the process: started once, stopped once.
type Service interface {
	// Start starts the service; ctx bounds the start only. On failure
	// nothing of it is left running and Stop is not called.
	Start(ctx context.Context) error
	// Stop ends the service and returns when every goroutine of it ended;
	// it bounds its own waits. Called once, after a successful Start.
	Stop()
}

// funcService is a Service made of two functions.
type funcService struct {
	start func(ctx context.Context) error
	stop  func()
}

func (f funcService) Start(ctx context.Context) error {
	if f.start == nil {
		return nil
	}
	return f.start(ctx)
}

func (f funcService) Stop() {
	if f.stop != nil {
		f.stop()
	}
}

// Func is a Service made of a start and a stop function, either of them nil
// (nothing to do): a step of a Group too small to be a type, such as a
// subscription or a final flush.
func Func(start func(ctx context.Context) error, stop func()) Service {
	return funcService{start: start, stop: stop}
}

// Group is an ordered list of services, started in order and stopped in
// reverse: the one undo path of whoever owns them.
type Group struct {
	mu       sync.Mutex
	services []Service
	started  int  // services[:started] are running
	done     bool // Start or Stop ran: a Group starts once
}

// NewGroup returns the group of services, in start order; nothing starts.
func NewGroup(services ...Service) *Group {
	return &Group{services: services}
}

// Start starts the services in order. When one fails, those started before
// it are stopped in reverse order, the later ones are never started, and
// its error is returned. A Group starts once: a second Start, or a Start
// after Stop, starts nothing and returns nil.
func (g *Group) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		return nil
	}
	g.done = true
	for _, s := range g.services {
		if err := s.Start(ctx); err != nil {
			g.stopLocked()
			return err
		}
		g.started++
	}
	return nil
}

// Stop stops the started services in reverse order and returns when all of
// them stopped. Later calls (and a Stop after a failed Start) do nothing.
func (g *Group) Stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.done = true
	g.stopLocked()
}

func (g *Group) stopLocked() {
	for ; g.started > 0; g.started-- {
		g.services[g.started-1].Stop()
	}
}

// Loop is a Service that runs a function on a goroutine of its own from
// Start until Stop: Stop cancels the function's context and returns when it
// returned. For a service that is one loop (a ticker, a sampler).
type Loop struct {
	run    func(ctx context.Context)
	cancel context.CancelFunc
	done   chan struct{}
}

// NewLoop returns the Loop of run, which must return soon after its
// context ends.
func NewLoop(run func(ctx context.Context)) *Loop { return &Loop{run: run} }

// Start starts run on its goroutine, under a context of its own (not ctx:
// the loop lives until Stop).
func (l *Loop) Start(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go func() {
		defer close(l.done)
		l.run(ctx)
	}()
	return nil
}

// Stop cancels run's context and waits for it to return; nothing to do when
// the loop never started.
func (l *Loop) Stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
}
