package gateway

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Pull hands out the queue's next available message, creating the queue if
// needed. wait < 0 waits until a message comes or ctx ends; wait == 0 does not
// wait. It returns (nil, nil) when no message came in time.
func (g *Gateway) Pull(ctx context.Context, queue string, wait time.Duration) (*Delivery, error) {
	release, err := g.waitSlot(wait)
	if err != nil {
		return nil, err
	}
	defer release()
	q, err := g.queues.ensure(ctx, queue)
	if err != nil {
		return nil, err
	}
	if wait == 0 && !q.isReady() {
		// A no-wait pull of a queue without a consumer (not used for a
		// while): if it holds nothing, answer so without making one. LMQ
		// clients that poll many queues with t=0 thus cost no consumers.
		if empty, err := g.queueEmpty(ctx, q); err == nil && empty {
			return nil, nil
		}
	}
	if err := g.ensureConsumerWithin(ctx, q, wait); err != nil {
		return nil, err
	}
	r, err := g.await(ctx, []*queueState{q}, wait)
	if r == nil || err != nil {
		return nil, err
	}
	return g.deliver(ctx, r)
}

// PullAny is Pull over every queue of scope (nil: all) whose name matches
// re, including queues created while it waits. Queues
// are not created by it.
//
// It never binds every matching queue: with thousands of queues that would
// make a consumer for each. It looks at the queues that have messages
// (the subject counts of their shard streams: a fresh look first, then
// looks shared by every pull-any of this gateway and at most
// RepollInterval/2 old) and tries them one at a time,
// starting at a rotating offset so that busy queues share the pulls fairly;
// probing all at once would take a message from each non-empty queue and
// have to give all but one back. While none has a message it sleeps until a
// notification names a matching queue (tried first) or the next re-poll
// (which also catches messages published by plain NATS programs and
// JetStream's own redeliveries). An idle pull-any thus costs nothing but
// one shared scan per re-poll interval.
func (g *Gateway) PullAny(ctx context.Context, re *regexp.Regexp, wait time.Duration, scope Scope) (*Delivery, error) {
	release, err := g.waitSlot(wait)
	if err != nil {
		return nil, err
	}
	defer release()
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	w := newAnyWaiter(re, scope)
	g.queues.addAny(w)
	defer g.queues.removeAny(w)
	var tick <-chan time.Time
	if wait != 0 {
		t := time.NewTicker(g.cfg.RepollInterval)
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
			found, err := g.queues.withMessages(ctx, w, maxAge)
			maxAge = g.cfg.RepollInterval / 2
			if err != nil && wait == 0 {
				return nil, err
			}
			if len(found) > 0 {
				start := int(g.rr.Add(1) % uint64(len(found)))
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
			r, err := g.tryQueue(ctx, name)
			if err != nil {
				return nil, err
			}
			if r != nil {
				return g.deliver(ctx, r)
			}
		}
		if wait == 0 {
			return nil, nil
		}
		scan = false
		select {
		case <-w.ch:
		case <-tick:
			scan = true
		case <-deadline:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-g.closing:
			return nil, nil
		}
	}
}

// ensureConsumerWithin makes the queue's consumer, trying again while
// JetStream is unavailable (a cluster electing its meta leader after a node
// died cannot make consumers) for as long as the pull may wait; a pull that
// may not wait gets the first answer.
func (g *Gateway) ensureConsumerWithin(ctx context.Context, q *queueState, wait time.Duration) error {
	var deadline time.Time
	if wait > 0 {
		deadline = time.Now().Add(wait)
	}
	for {
		err := q.ensureConsumer(ctx)
		if err == nil || wait == 0 || !errors.Is(err, ErrUnavailable) ||
			(!deadline.IsZero() && time.Now().Add(250*time.Millisecond).After(deadline)) {
			return err
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		case <-g.closing:
			t.Stop()
			return err
		}
	}
}

// queueEmpty reports whether the queue's subjects hold no message at all
// (delays aside). Parts and dead letters count as messages: an
// over-approximation only costs the caller a consumer.
func (g *Gateway) queueEmpty(ctx context.Context, q *queueState) (bool, error) {
	st, err := q.streamHandle(ctx)
	if err != nil {
		return false, err
	}
	for _, filter := range mapping.QueueSubjects(q.name) {
		if strings.HasPrefix(filter, mapping.SubjectPrefix+".s.") {
			continue
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return false, jsErr("queue info", err)
		}
		for _, n := range info.State.Subjects {
			if n > 0 {
				return false, nil
			}
		}
	}
	return true, nil
}

// tryQueue takes the next message of an existing queue without waiting;
// nil when it has none (or is gone). Its error is the caller's context's.
func (g *Gateway) tryQueue(ctx context.Context, name string) (*raw, error) {
	q, err := g.queues.open(ctx, name)
	if err == nil {
		err = q.ensureConsumer(ctx)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, ErrNotFound) {
			g.log.Debug("pull-any: queue not available", "queue", name, "err", err)
		}
		return nil, nil
	}
	r, err := g.await(ctx, []*queueState{q}, 0)
	if err != nil && ctx.Err() == nil {
		err = nil
	}
	return r, err
}

// anyWaiter is a waiting pull-any: notifications of matching queues reach it
// (locals.notifyAny) and wake it.
type anyWaiter struct {
	re       *regexp.Regexp
	scope    Scope
	ch       chan struct{} // holds one wake-up
	mu       sync.Mutex
	hits     []string // queues notified since the last take, at most maxAnyHits
	overflow bool     // more were: look at all
}

// maxAnyHits bounds the notified queues a pull-any remembers between looks.
const maxAnyHits = 64

func newAnyWaiter(re *regexp.Regexp, scope Scope) *anyWaiter {
	return &anyWaiter{re: re, scope: scope, ch: make(chan struct{}, 1)}
}

func (w *anyWaiter) matches(name string) bool {
	return w.re.MatchString(name) && w.scope.Allows(name)
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
func (g *Gateway) await(ctx context.Context, qs []*queueState, wait time.Duration) (*raw, error) {
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
	case <-g.closing:
	}
	return g.giveUp(ctx, w)
}

// giveUp ends a wait. If a message was handed over at the same moment, a
// client that is still there gets it, one that left gives it back.
func (g *Gateway) giveUp(ctx context.Context, w *waiter) (*raw, error) {
	if w.claimed.CompareAndSwap(false, true) {
		return nil, ctx.Err()
	}
	r := <-w.ch
	if r == nil {
		return nil, ctx.Err()
	}
	if ctx.Err() != nil {
		g.spawn(func(context.Context) { g.release(r, false) })
		return nil, ctx.Err()
	}
	return r, nil
}

// isReady reports whether the queue's consumer exists as far as this
// gateway knows.
func (q *queueState) isReady() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ready
}
