package gateway

import (
	"context"
	"regexp"
	"time"
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
	r, err := g.await(ctx, []*queueState{q}, wait)
	if r == nil || err != nil {
		return nil, err
	}
	return g.deliver(ctx, r)
}

// PullAny is Pull over every queue whose name matches re, including queues
// created while it waits. Queues are not created by it.
//
// The waiter is registered on every matching queue without fetching, then the
// queues are probed one at a time, starting at a rotating offset so that busy
// queues share the pulls fairly. Probing all at once would take a message
// from each non-empty queue and have to give all but one back.
func (g *Gateway) PullAny(ctx context.Context, re *regexp.Regexp, wait time.Duration) (*Delivery, error) {
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
	seen := make(map[string]bool)
	var qs []*queueState
	w := newWaiter(false, 0)
	defer func() {
		for _, q := range qs {
			q.remove(w)
		}
	}()
	for {
		names, created := g.queues.matching(re)
		var fresh []*queueState
		for _, name := range names {
			if seen[name] {
				continue
			}
			q, err := g.queues.open(ctx, name)
			if err != nil {
				continue // deleted meanwhile: never brought back
			}
			seen[name] = true
			fresh = append(fresh, q)
			qs = append(qs, q)
			q.addPassive(w)
		}
		r, gotOne, stop := g.probe(ctx, w, fresh)
		if !gotOne && !stop && wait != 0 {
			select {
			case r = <-w.ch:
				gotOne = true
			case <-created:
				continue
			case <-deadline:
			case <-ctx.Done():
			case <-g.closing:
			}
		}
		if gotOne && r == nil {
			// A queue went away and answered the waiter: start over.
			for _, q := range qs {
				q.remove(w)
			}
			w, qs, seen = newWaiter(false, 0), nil, make(map[string]bool)
			continue
		}
		if !gotOne {
			var err error
			if r, err = g.giveUp(ctx, w); r == nil {
				return nil, err
			}
		}
		return g.deliver(ctx, r)
	}
}

// probe fetches for w from each of qs in turn until w is served. stop is true
// when the caller's context or the gateway ended the wait.
func (g *Gateway) probe(ctx context.Context, w *waiter, qs []*queueState) (r *raw, gotOne, stop bool) {
	if len(qs) == 0 {
		return nil, false, false
	}
	start := int(g.rr.Add(1) % uint64(len(qs)))
	for i := range qs {
		done := qs[(start+i)%len(qs)].probe()
		select {
		case r = <-w.ch:
			return r, true, false
		case <-done:
		case <-ctx.Done():
			return nil, false, true
		case <-g.closing:
			return nil, false, true
		}
	}
	return nil, false, false
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
