// Package dispatch is the pull engine of the core (package gateway): this
// gateway's per-queue dispatch state (a Queue per queue it uses, made over
// gateway/registry) and how it gets messages out of JetStream for waiting
// clients, the queues' priority levels included, and the notifications
// (lmq.n.<enc>) that wake them, published and received here. What the core
// decides about a message once it has it (deliver it, release it, drop an
// expired one, bury one whose retries are used up) stays the core's: Pull
// and PullAny return a Raw, and the pulled messages no client takes reach
// the core through Rules.
//
// Pulling: a client's pull registers a waiter on the queue's dispatcher. The
// dispatcher issues no_wait pull requests (batch = waiting clients, one
// request at a time per queue; every queue's answers come on one
// subscription) and never leaves a pull request standing in
// JetStream: a standing request would keep taking messages after its client
// left, and giving such a message back either reorders the queue or costs it
// a retry. (Right after a push notification a request may wait up to 50 ms,
// because JetStream acknowledges a publish before the consumer counts the
// message.) While a queue is empty its waiters sleep until a notification on
// lmq.n.<enc> (published by any gateway after every stored push or release,
// while other gateways are known to be running: package peers) or
// a periodic re-poll (which also catches messages published by plain NATS
// programs and JetStream's own redeliveries). An idle long-poll therefore
// costs no JetStream requests between re-polls. Pull-any does not bind the
// queues it matches: it tries those the shards' subject counts show holding
// messages, then sleeps until a notification names a matching queue or the
// next re-poll (wait.go, scan.go).
//
// Built from: package store (the consumers, the pull request wire, the
// shards' subject counts), gateway/registry (which queues exist),
// gateway/props (a queue's retries and timeout), internal/peers (whether
// to notify), internal/wakeups (timed pokes of queues and dispatchers),
// internal/lifecycle (the core's work owner) and internal/noise.
//
// Lifecycle (lifecycle.Service): New, then Start once the registry started
// (its OnDrop is Dropped): the subscriptions (the notifications and the pull
// replies) and the dispatcher's goroutines; Stop before the work owner
// closes: the subscriptions end, waiting clients answer empty, and it
// returns once the dispatcher's goroutines ended.
package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/props"
	"github.com/lmq-gateway/lmq-gateway/gateway/registry"
	"github.com/lmq-gateway/lmq-gateway/internal/lifecycle"
	"github.com/lmq-gateway/lmq-gateway/internal/noise"
	"github.com/lmq-gateway/lmq-gateway/internal/peers"
	"github.com/lmq-gateway/lmq-gateway/internal/wakeups"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// opTimeout bounds one background JetStream operation (the core's).
const opTimeout = 10 * time.Second

// Rules is what the core does with a pulled message no client takes. Each
// runs on a goroutine of the work owner's.
type Rules struct {
	// Release puts the message back at the tail of its subject, not
	// counting the delivery (the core's release(r, false)).
	Release func(r *Raw)
	// Discard ends a message whose retries are used up (dropped, or kept
	// as a dead letter).
	Discard func(r *Raw)
	// Drop removes an expired message.
	Drop func(r *Raw)
	// Groups gives a head to every ordered group of the queue that has a
	// backlog and no head (gateway/groups.go) and reports whether the
	// queue has groups; nil: the core has none.
	Groups func(queue string) bool
}

// Config is what a Dispatcher works with.
type Config struct {
	Bus   *bus.Bus
	Store *store.Store
	Props *props.Cache
	// Registry is which queues exist; started before the dispatcher.
	Registry *registry.Registry
	// Work owns the background work (lifecycle.Work); Closing is closed
	// when the gateway stops waiting (StopWaiting): waits end empty.
	Work    *lifecycle.Work
	Closing <-chan struct{}
	// Wrap wraps the subscriptions' handlers (the core counts them as its
	// work).
	Wrap func(bus.Handler) bus.Handler
	// Peers says whether other gateways run (notifications are published
	// only then) and learns of those that notify.
	Peers  *peers.Peers
	Logger *slog.Logger
	Noise  *noise.Limiter
	// ID is the gateway's id (4 bytes): a notification's payload starts
	// with it, so that the gateway ignores its own.
	ID []byte
	// RepollInterval: how often a queue with waiting clients is polled
	// even without a notification.
	RepollInterval time.Duration
	Rules          Rules
}

// Dispatcher is this gateway's pull engine; safe for concurrent use.
type Dispatcher struct {
	cfg     Config
	bus     *bus.Bus
	store   *store.Store
	props   *props.Cache
	work    *lifecycle.Work
	closing <-chan struct{}
	peers   *peers.Peers
	log     *slog.Logger
	noise   *noise.Limiter
	rules   Rules

	idPfx []byte
	// prioPfx[p] is the payload of a notification of priority p (notifyPayload).
	prioPfx [mapping.MaxPriority + 1][]byte

	queues   *locals
	pulls    *pullTable
	fetchSeq atomic.Uint64
	rr       atomic.Uint64 // rotates pull-any's first queue
	wakes    *wakeups.Timer[wakeTarget]

	// Set by Start, ended by Stop: the subscriptions, the goroutines (the
	// re-poll and control loops, the wake-ups), stopped (closed by Stop)
	// and run (the goroutines' context, cancelled by Stop).
	subs    []*bus.Subscription
	bg      sync.WaitGroup
	stopped chan struct{}
	run     context.Context
	cancel  context.CancelFunc
	// changed signals controlLoop (control.go).
	changed chan struct{}

	// TestSignals report events to tests (signals.go); set nothing here
	// outside tests.
	TestSignals Signals
}

// New makes a dispatcher; nothing runs until Start.
func New(cfg Config) *Dispatcher {
	d := &Dispatcher{
		cfg:     cfg,
		bus:     cfg.Bus,
		store:   cfg.Store,
		props:   cfg.Props,
		work:    cfg.Work,
		closing: cfg.Closing,
		peers:   cfg.Peers,
		log:     cfg.Logger,
		noise:   cfg.Noise,
		rules:   cfg.Rules,
		idPfx:   cfg.ID,
		changed: make(chan struct{}, 1),
		stopped: make(chan struct{}),
	}
	for p := 1; p <= mapping.MaxPriority; p++ {
		d.prioPfx[p] = append(append([]byte(nil), cfg.ID...), byte(p))
	}
	d.queues = newLocals(d)
	d.queues.reg = cfg.Registry
	d.pulls = newPullTable(cfg.Bus.NewInbox())
	d.wakes = newWakeups(d)
	return d
}

// Start makes the dispatcher's subscriptions, each handler wrapped by
// Config.Wrap (every gateway's notifications, and the answers to this
// one's pull requests), and starts its goroutines: the re-poll and control
// loops (until Closing or Stop) and the wake-ups (until Stop)
// (lifecycle.Service). On failure nothing is left subscribed.
func (d *Dispatcher) Start(context.Context) error {
	sub, err := d.bus.Subscribe(mapping.NotifyPrefix+"*", d.cfg.Wrap(d.onNotify))
	if err != nil {
		return fmt.Errorf("subscribe notifications: %w", err)
	}
	d.subs = append(d.subs, sub)
	// One subscription takes the answers to every queue's pull requests; it
	// must never drop one (a dropped message waits out its AckWait).
	if sub, err = d.bus.Subscribe(d.pulls.inbox+"*", d.cfg.Wrap(d.onPullReply)); err == nil {
		d.subs = append(d.subs, sub)
		err = sub.Unbounded()
	}
	if err != nil {
		d.unsubscribe()
		return fmt.Errorf("subscribe pull replies: %w", err)
	}
	d.run, d.cancel = context.WithCancel(d.work.Context())
	d.bg.Add(3)
	go d.repollLoop()
	go d.controlLoop()
	go func() {
		defer d.bg.Done()
		d.wakes.Run(d.run)
	}()
	return nil
}

// Stop ends the subscriptions and every queue's dispatcher (their waiting
// clients answer empty), then the goroutines, and waits for them
// (lifecycle.Service). Work they started is the work owner's, which closes
// next.
func (d *Dispatcher) Stop() {
	d.unsubscribe()
	d.queues.stop()
	if d.cancel == nil {
		return // not started
	}
	close(d.stopped)
	d.cancel()
	d.bg.Wait()
}

func (d *Dispatcher) unsubscribe() {
	for _, s := range d.subs {
		_ = s.Unsubscribe()
	}
	d.subs = nil
}

// spawn runs f on a goroutine of the work owner's; false (and f not run)
// when closing. A message left unhandled that way stays pending in
// JetStream and comes back after the consumer's AckWait.
func (d *Dispatcher) spawn(f func(ctx context.Context)) bool { return d.work.Go(f) }

// within runs f on the calling goroutine, counted; false (and f not run)
// when closing.
func (d *Dispatcher) within(f func(ctx context.Context)) bool { return d.work.Within(f) }

// Bind returns the queue's dispatcher; mayCreate creates the queue when it
// does not exist, otherwise it is store.ErrNotFound.
func (d *Dispatcher) Bind(ctx context.Context, queue string, mayCreate bool) (*Queue, error) {
	return d.queues.bind(ctx, queue, mayCreate)
}

// Ensure returns the queue's dispatcher, creating the queue when it does not
// exist.
func (d *Dispatcher) Ensure(ctx context.Context, queue string) (*Queue, error) {
	return d.queues.ensure(ctx, queue)
}

// EnsureAckWait raises the consumer's AckWait when the queue's timeout grew
// (ackwait.go).
func (d *Dispatcher) EnsureAckWait(ctx context.Context, q *Queue, timeout time.Duration) error {
	return d.queues.ensureAckWait(ctx, q, timeout)
}

// ApplyProps brings the queue's consumer in line with changed properties.
func (d *Dispatcher) ApplyProps(ctx context.Context, queue string) error {
	return d.queues.applyProps(ctx, queue)
}

// PullRequests is the number of pull requests sent so far (tests count
// them).
func (d *Dispatcher) PullRequests() uint64 { return d.fetchSeq.Load() }

// Waiting is the number of clients waiting on the queue's dispatcher here,
// claimed ones not yet dropped included; 0 when this gateway has none.
func (d *Dispatcher) Waiting(queue string) int {
	q := d.queues.local(queue)
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiters)
}

// PrioritySeen reports whether the queue's dispatcher saw a priority
// (ok: this gateway has one).
func (d *Dispatcher) PrioritySeen(queue string) (seen, ok bool) {
	q := d.queues.local(queue)
	if q == nil {
		return false, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.prio.seen, true
}
