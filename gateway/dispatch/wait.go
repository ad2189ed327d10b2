package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// Pull takes the queue's next available message for a client, creating
// the queue if needed (the core's Pull says how long it waits); nil when
// none came in time. The core makes the delivery.
func (d *Dispatcher) Pull(ctx context.Context, queue string, wait time.Duration) (*Raw, error) {
	q, err := d.queues.ensure(ctx, queue)
	if err != nil {
		return nil, err
	}
	if wait == 0 && d.props.Effective(queue).Paused {
		return nil, nil // control.go
	}
	if wait == 0 && !q.isReady() && !q.lately() {
		// A no-wait pull of a queue without a consumer (not used for a
		// while): if it holds nothing, answer so without making one. LMQ
		// clients that poll many queues with t=0 thus cost no consumers.
		if empty, err := d.queueEmpty(ctx, q); err == nil && empty {
			return nil, nil
		}
	}
	if err := d.ensureConsumerWithin(ctx, q, wait); err != nil {
		return nil, err
	}
	return d.await(ctx, []*Queue{q}, wait)
}

// PullAny is Pull over every existing queue whose name matches (the core's
// PullAny says how it looks), including queues created while it waits.
// Queues are not created by it.
func (d *Dispatcher) PullAny(ctx context.Context, matches func(queue string) bool, wait time.Duration) (*Raw, error) {
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	w := newAnyWaiter(matches)
	d.queues.addAny(w)
	defer d.queues.removeAny(w)
	var tick <-chan time.Time
	if wait != 0 {
		t := time.NewTicker(d.cfg.RepollInterval)
		defer t.Stop()
		tick = t.C
	}
	// The first look is fresh (a message pushed just before the call must be
	// found); re-polls share looks up to half an interval old.
	scan, maxAge := true, time.Duration(0)
	for {
		hits, overflow := w.take()
		cands := hits
		if scan || overflow {
			found, err := d.queues.withMessages(ctx, w, maxAge)
			maxAge = d.cfg.RepollInterval / 2
			if err != nil && wait == 0 {
				return nil, err
			}
			if len(found) > 0 {
				start := int(d.rr.Add(1) % uint64(len(found)))
				cands = append(cands, found[start:]...)
				cands = append(cands, found[:start]...)
			}
		}
		tried := make(map[string]bool, len(cands))
		for _, name := range cands {
			if tried[name] {
				continue
			}
			tried[name] = true
			r, err := d.tryQueue(ctx, name)
			if err != nil {
				return nil, err
			}
			if r != nil {
				return r, nil
			}
		}
		if wait == 0 {
			return nil, nil
		}
		scan = false
		d.TestSignals.PullAnyParked.Signal(len(tried))
		select {
		case <-w.ch:
		case <-tick:
			scan = true
		case <-deadline:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-d.closing:
			return nil, nil
		}
	}
}

// ensureConsumerWithin makes the queue's consumer, trying again while
// JetStream is unavailable (a cluster electing its meta leader after a node
// died cannot make consumers) for as long as the pull may wait; a pull that
// may not wait gets the first answer.
func (d *Dispatcher) ensureConsumerWithin(ctx context.Context, q *Queue, wait time.Duration) error {
	var deadline time.Time
	if wait > 0 {
		deadline = time.Now().Add(wait)
	}
	for {
		err := q.ensureConsumer(ctx)
		if err == nil || wait == 0 || !errors.Is(err, store.ErrUnavailable) ||
			(!deadline.IsZero() && time.Now().Add(250*time.Millisecond).After(deadline)) {
			return err
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		case <-d.closing:
			t.Stop()
			return err
		}
	}
}

// queueEmpty reports whether the queue holds no waiting message
// (mapping.WaitingFilters: heads included, so a head copy whose backlog
// message is being removed still counts; an over-approximation only costs
// the caller a consumer).
func (d *Dispatcher) queueEmpty(ctx context.Context, q *Queue) (bool, error) {
	sh, err := q.shardHandle(ctx)
	if err != nil {
		return false, err
	}
	for _, filter := range mapping.WaitingFilters(q.name) {
		counts, err := sh.SubjectCounts(ctx, filter)
		if err != nil {
			return false, fmt.Errorf("queue info: %w", err)
		}
		if levels := levelsHolding(counts); levels != 0 {
			// A fresh look at the levels: the first pull's (firstuse.go).
			q.mu.Lock()
			q.markLevelsLocked(levels)
			q.mu.Unlock()
		}
		for _, n := range counts {
			if n > 0 {
				return false, nil
			}
		}
	}
	return true, nil
}

// tryQueue takes the next message of an existing queue without waiting;
// nil when it has none (or is gone). Its error is the caller's context's.
func (d *Dispatcher) tryQueue(ctx context.Context, name string) (*Raw, error) {
	q, err := d.queues.open(ctx, name)
	if err == nil {
		err = q.ensureConsumer(ctx)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, store.ErrNotFound) {
			d.log.Debug("pull-any: queue not available", "queue", name, "err", err)
		}
		return nil, nil
	}
	r, err := d.await(ctx, []*Queue{q}, 0)
	if err != nil && ctx.Err() == nil {
		err = nil
	}
	return r, err
}

// anyWaiter is a waiting pull-any: notifications of matching queues reach it
// (locals.notifyAny) and wake it.
type anyWaiter struct {
	matches  func(queue string) bool
	ch       chan struct{} // holds one wake-up
	mu       sync.Mutex
	hits     []string // queues notified since the last take, at most maxAnyHits
	overflow bool     // more were: look at all
}

// maxAnyHits bounds the notified queues a pull-any remembers between looks.
const maxAnyHits = 64

func newAnyWaiter(matches func(queue string) bool) *anyWaiter {
	return &anyWaiter{matches: matches, ch: make(chan struct{}, 1)}
}

func (w *anyWaiter) hit(name string) {
	if !w.matches(name) {
		return
	}
	w.mu.Lock()
	switch {
	case slices.Contains(w.hits, name):
	case len(w.hits) < maxAnyHits:
		w.hits = append(w.hits, name)
	default:
		w.overflow = true
	}
	w.mu.Unlock()
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

func (w *anyWaiter) take() (hits []string, overflow bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	hits, overflow = w.hits, w.overflow
	w.hits, w.overflow = nil, false
	return hits, overflow
}

// await registers a waiter on qs and waits for a message.
func (d *Dispatcher) await(ctx context.Context, qs []*Queue, wait time.Duration) (*Raw, error) {
	w := newWaiter(wait == 0, len(qs))
	for _, q := range qs {
		q.add(w)
	}
	defer func() {
		for _, q := range qs {
			q.remove(w)
		}
	}()
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	select {
	case r := <-w.ch:
		return r, nil
	case <-deadline:
	case <-ctx.Done():
	case <-d.closing:
	}
	return d.giveUp(ctx, w)
}

// giveUp ends a wait. If a message was handed over at the same moment, a
// client that is still there gets it, one that left gives it back.
func (d *Dispatcher) giveUp(ctx context.Context, w *waiter) (*Raw, error) {
	if w.claimed.CompareAndSwap(false, true) {
		return nil, ctx.Err()
	}
	r := <-w.ch
	if r == nil {
		return nil, ctx.Err()
	}
	if ctx.Err() != nil {
		d.spawn(func(context.Context) { d.rules.Release(r) })
		return nil, ctx.Err()
	}
	return r, nil
}

// isReady reports whether the queue's consumer exists as far as this
// gateway knows.
func (q *Queue) isReady() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ready
}
