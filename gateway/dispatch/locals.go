package dispatch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/lmq-gateway/lmq-gateway/gateway/registry"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// locals is this gateway's state of the queues it uses: a dispatcher
// (Queue) per queue, the queues with waiting clients, the waiting
// pull-anys. Which queues exist is the registry's (package registry); a
// queue's state ends when the registry drops the queue (dropped).
type locals struct {
	d   *Dispatcher
	reg *registry.Registry // set by Dispatcher.Start, before anything is served

	mu      sync.Mutex
	states  map[string]*Queue       // queue name → local state (queues this gateway used)
	byEnc   map[string]*Queue       // the same, by encoded name
	anyWait map[*anyWaiter]struct{} // waiting pull-anys (scan.go)
	// anyCount is len(anyWait), read without the lock on every notification.
	anyCount atomic.Int32

	// active holds the queue states with waiting clients (or that had them
	// at the last re-poll): the re-poll loop looks at these only. Its lock
	// is taken under a Queue's, never the other way round.
	activeMu sync.Mutex
	active   map[*Queue]struct{}
	// activeWake wakes the re-poll loop, asleep while active is empty,
	// when the first queue becomes busy.
	activeWake chan struct{}

	// recent: priority levels lately notified for queues without state
	// (firstuse.go).
	recentMu sync.Mutex
	recent   map[string]recentLevels
}

func newLocals(d *Dispatcher) *locals {
	return &locals{
		d:          d,
		states:     make(map[string]*Queue),
		byEnc:      make(map[string]*Queue),
		anyWait:    make(map[*anyWaiter]struct{}),
		active:     make(map[*Queue]struct{}),
		activeWake: make(chan struct{}, 1),
	}
}

// stop ends every dispatcher: their waiting clients answer empty.
func (l *locals) stop() {
	l.mu.Lock()
	states := make([]*Queue, 0, len(l.states))
	for _, q := range l.states {
		states = append(states, q)
	}
	l.mu.Unlock()
	for _, q := range states {
		q.shutdown()
	}
}

// Dropped ends the local state of a queue that stopped existing: its
// waiting clients answer empty. The registry calls it under its lock
// (registry.Config.OnDrop); the shutdown runs after.
func (d *Dispatcher) Dropped(queue string) func() { return d.queues.dropped(queue) }

func (l *locals) dropped(queue string) func() {
	l.mu.Lock()
	q := l.states[queue]
	if q != nil {
		delete(l.states, queue)
		delete(l.byEnc, q.enc)
	}
	l.mu.Unlock()
	if q == nil {
		return nil
	}
	return q.shutdown
}

// busy marks q as having waiting clients (called under q.mu).
func (l *locals) busy(q *Queue) {
	l.activeMu.Lock()
	first := len(l.active) == 0
	l.active[q] = struct{}{}
	l.activeMu.Unlock()
	if first {
		select {
		case l.activeWake <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// idle unmarks q, which has no waiting client and no request out (called
// under q.mu).
func (l *locals) idle(q *Queue) {
	l.activeMu.Lock()
	delete(l.active, q)
	l.activeMu.Unlock()
}

// busyStates returns the queue states marked busy.
func (l *locals) busyStates() []*Queue {
	l.activeMu.Lock()
	defer l.activeMu.Unlock()
	out := make([]*Queue, 0, len(l.active))
	for q := range l.active {
		out = append(out, q)
	}
	return out
}

// all returns every local queue state.
func (l *locals) all() []*Queue {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*Queue, 0, len(l.states))
	for _, q := range l.states {
		out = append(out, q)
	}
	return out
}

// localByEnc finds local queue state by encoded name.
func (l *locals) localByEnc(enc string) *Queue {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byEnc[enc]
}

// local returns the queue's local state if this gateway has it.
func (l *locals) local(queue string) *Queue {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.states[queue]
}

// ensure returns the queue's local state, creating the queue when it does
// not exist.
func (l *locals) ensure(ctx context.Context, queue string) (*Queue, error) {
	return l.bind(ctx, queue, true)
}

// open returns the local state of an existing queue and store.ErrNotFound when the
// queue does not exist: for the regexp operations, which must never bring
// back a queue that another gateway deleted after this one listed it.
func (l *locals) open(ctx context.Context, queue string) (*Queue, error) {
	return l.bind(ctx, queue, false)
}

// bind returns the queue's local state. A queue's state costs no JetStream
// resource: its consumer is made on the first pull (Queue.ready).
func (l *locals) bind(ctx context.Context, queue string, mayCreate bool) (*Queue, error) {
	if q := l.local(queue); q != nil {
		return q, nil
	}
	if err := validName(queue); err != nil {
		return nil, err
	}
	if mayCreate {
		release, err := l.reg.Reserve(ctx, queue)
		if err != nil {
			return nil, err
		}
		err = l.reg.Register(ctx, queue)
		release()
		if err != nil {
			return nil, err
		}
	} else if ok, err := l.reg.Exists(ctx, queue); err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("queue %q: %w", queue, store.ErrNotFound)
	}
	q := newQueue(l.d, queue)
	q.ackWait = store.Backstop(l.d.props.Effective(queue).TimeoutDuration())
	// Recorded under the registry's lock, so that a deletion (by another
	// gateway) while it was being bound either comes first and is seen
	// here, or comes after and ends it (dropped).
	out := q
	if !l.reg.IfKnown(queue, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if prev := l.states[queue]; prev != nil {
			out = prev
			return
		}
		l.states[queue] = q
		l.byEnc[q.enc] = q
	}) {
		return nil, fmt.Errorf("queue %q: %w", queue, store.ErrNotFound)
	}
	// Levels notified before the state existed (firstuse.go); later ones
	// reach it directly.
	if mask := l.takeRecent(out.enc); mask != 0 {
		out.mu.Lock()
		out.markLevelsLocked(mask)
		out.mu.Unlock()
	}
	return out, nil
}

// validName checks a queue's name (the core's validName).
func validName(queue string) error { return store.CheckQueueName(queue) }
