package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// cellResult is one measured cell of the push, pull or mixed workloads.
type cellResult struct {
	workload string
	target   string
	conc     int
	depth    int
	size     int
	queues   int

	msgs     int64 // completed operations (pushes; pull+acks)
	pushed   int64 // mixed: pushes done alongside
	elapsed  time.Duration
	rate     float64
	lat      percentiles
	srvCPU   time.Duration // CPU of the serving processes during the cell
	errors   int64
	missing  int64       // counted messages a pull did not find
	retried  int64       // pulls of a counted message that had to wait for it
	pushLat  percentiles // mixed: latency of the pushes
	srvRSS   int64       // RSS of the serving processes after the cell
	repRates []float64   // --repeat: the rates of all repetitions
	firstErr string
}

// errTally counts operation errors and keeps the first for the report.
type errTally struct {
	n     atomic.Int64
	mu    sync.Mutex
	first error
}

func (e *errTally) add(err error) {
	if e.n.Add(1) == 1 {
		e.mu.Lock()
		e.first = err
		e.mu.Unlock()
	}
}

func (e *errTally) firstString() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.first == nil {
		return ""
	}
	return e.first.Error()
}

// pauseAfterError keeps a failing target from being hammered in a hot loop.
func pauseAfterError(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Millisecond):
	}
}

// cellLimit bounds a cell well beyond its nominal duration: a server that
// stops answering must not hang the run.
func (b *bench) cellLimit(d time.Duration) time.Duration { return d + 60*time.Second }

func (b *bench) openClients(ctx context.Context, t target, n int) ([]client, error) {
	cs := make([]client, 0, n)
	for range n {
		c, err := t.newClient(ctx)
		if err != nil {
			closeClients(cs)
			return nil, fmt.Errorf("%s: new client: %w", t.name(), err)
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func closeClients(cs []client) {
	for _, c := range cs {
		_ = c.close()
	}
}

// slots runs fn for every (client, depth slot) pair in its own goroutine and
// waits for all.
func slots(clients []client, depth int, fn func(w, k int, c client)) {
	var wg sync.WaitGroup
	for w, c := range clients {
		for k := range depth {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fn(w, k, c)
			}()
		}
	}
	wg.Wait()
}

// recordedSlots is slots with a latency recorder of its own for every slot
// (no lock shared between them); it returns them all for merging.
func recordedSlots(clients []client, depth int, fn func(w, k int, c client, rec *recorder)) []*recorder {
	recs := make([]*recorder, len(clients)*depth)
	slots(clients, depth, func(w, k int, c client) {
		rec := &recorder{}
		recs[w*depth+k] = rec
		fn(w, k, c, rec)
	})
	return recs
}

func (b *bench) newCell(workload string, t target, qs *queueSet, conc, size int) cellResult {
	return cellResult{workload: workload, target: t.name(), conc: conc, depth: t.depth(), size: size, queues: len(qs.names)}
}

// finish fills in the figures common to all cells.
func (r *cellResult) finish(recs []*recorder, errs *errTally, elapsed, cpu time.Duration) {
	r.elapsed = elapsed
	if elapsed > 0 {
		r.rate = float64(r.msgs) / elapsed.Seconds()
	}
	r.lat = merge(recs)
	r.srvCPU = cpu
	r.errors = errs.n.Load()
	r.firstErr = errs.firstString()
}

// pusher pushes to its queues round-robin until the deadline, counting each
// stored message in qs. It is the loop of the push cell and of the pushing
// half of mixed.
func (b *bench) pusher(ctx context.Context, c client, qs *queueSet, own []int, start, size int,
	deadline time.Time, rec *recorder, done *atomic.Int64, errs *errTally) {
	body := newBody(size)
	for i := start; ctx.Err() == nil; i++ {
		now := time.Now()
		if !now.Before(deadline) {
			return
		}
		q := own[i%len(own)]
		stamp(body, b.epoch, now)
		if err := c.push(ctx, qs.names[q], body); err != nil {
			errs.add(err)
			pauseAfterError(ctx)
			continue
		}
		rec.add(time.Since(now))
		qs.remaining[q].Add(1)
		done.Add(1)
	}
}

func (b *bench) pushCell(ctx context.Context, t target, qs *queueSet, conc, size int) (cellResult, error) {
	return b.timedCell(ctx, wPush, t, qs, conc, size, 1, func(ctx context.Context, r *cellResult, clients [][]client, deadline time.Time, errs *errTally) []*recorder {
		var done atomic.Int64
		recs := recordedSlots(clients[0], t.depth(), func(w, k int, c client, rec *recorder) {
			b.pusher(ctx, c, qs, qs.assigned(w, conc), k, size, deadline, rec, &done, errs)
		})
		r.msgs = done.Load()
		return recs
	})
}

// timedCell is the frame of the push, pull and mixed cells: a context
// bounded well beyond the cell's duration, sets of conc clients each
// (mixed: pushers and pullers), and the server's CPU and a profile taken
// around the timed part. run works until deadline, counts into r and
// returns the latency recorders.
func (b *bench) timedCell(ctx context.Context, workload string, t target, qs *queueSet, conc, size, sets int,
	run func(ctx context.Context, r *cellResult, clients [][]client, deadline time.Time, errs *errTally) []*recorder) (cellResult, error) {
	r := b.newCell(workload, t, qs, conc, size)
	ctx, cancel := context.WithTimeout(ctx, b.cellLimit(b.cfg.duration))
	defer cancel()
	clients := make([][]client, sets)
	for i := range clients {
		cs, err := b.openClients(ctx, t, conc)
		if err != nil {
			return r, err
		}
		defer closeClients(cs)
		clients[i] = cs
	}

	var errs errTally
	cpu0 := b.serverCPU(t)
	profiled := b.startProfile(ctx, r)
	start := time.Now()
	recs := run(ctx, &r, clients, start.Add(b.cfg.duration), &errs)
	r.finish(recs, &errs, time.Since(start), b.serverCPU(t)-cpu0)
	if path := profiled(); path != "" {
		b.attrs.add(ctx, fmt.Sprintf("%s %s, C=%d, %s", r.workload, r.target, r.conc, fmtSize(r.size)), path, r.msgs)
	}
	return r, b.cellErr(ctx)
}

// cellErr reports an interrupted run or a dead gateway after a cell.
func (b *bench) cellErr(ctx context.Context) error {
	if err := b.checkAlive(); err != nil {
		return err
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// pickReserved finds, from *cursor on, one of own's queues that holds a
// counted message, reserves that message and advances the cursor past it.
func pickReserved(qs *queueSet, own []int, cursor *int) (int, bool) {
	for range own {
		q := own[*cursor%len(own)]
		*cursor++
		if qs.reserve(q) {
			return q, true
		}
	}
	return 0, false
}

// takeReserved pulls the message reserved on queue q. It asks without
// waiting first, then, if the server does not show it yet, with growing
// waits: a message the bench saw stored must come out. It returns a nil ack
// when the message did not show (counted as missing).
func (b *bench) takeReserved(ctx context.Context, c client, qs *queueSet, q int, missing, retried *atomic.Int64) ([]byte, func(context.Context) error, error) {
	for i, wait := range []time.Duration{0, 100 * time.Millisecond, time.Second} {
		if i > 0 {
			retried.Add(1)
		}
		body, ack, err := c.pull(ctx, qs.names[q], wait)
		if err != nil {
			qs.remaining[q].Add(1) // give the reservation back
			return nil, nil, err
		}
		if ack != nil {
			return body, ack, nil
		}
	}
	missing.Add(1)
	qs.markDirty(q)
	return nil, nil, nil
}

// ackPulled finishes one pull from queue q that returned ack and err: it
// counts a failed pull (pausing before the next), passes over an empty one,
// and acks a message. It reports whether a message was pulled and acked.
func ackPulled(ctx context.Context, qs *queueSet, q int, ack func(context.Context) error, err error, errs *errTally) bool {
	if err != nil {
		errs.add(err)
		pauseAfterError(ctx)
		return false
	}
	if ack == nil {
		return false
	}
	if err := ack(ctx); err != nil {
		// The message stays in flight on the server and comes back later:
		// the queue must be recreated before the next cell.
		qs.markDirty(q)
		errs.add(err)
		return false
	}
	return true
}

func (b *bench) pullCell(ctx context.Context, t target, qs *queueSet, conc, size int) (cellResult, error) {
	return b.timedCell(ctx, wPull, t, qs, conc, size, 1, func(ctx context.Context, r *cellResult, clients [][]client, deadline time.Time, errs *errTally) []*recorder {
		var done, missing, retried atomic.Int64
		stateful := t.stateful()
		recs := recordedSlots(clients[0], t.depth(), func(w, k int, c client, rec *recorder) {
			own := qs.assigned(w, conc)
			cursor := k
			for ctx.Err() == nil && time.Now().Before(deadline) {
				t0 := time.Now()
				var ack func(context.Context) error
				var err error
				var q int
				if stateful {
					var ok bool
					if q, ok = pickReserved(qs, own, &cursor); !ok {
						return // this client's queues are drained
					}
					_, ack, err = b.takeReserved(ctx, c, qs, q, &missing, &retried)
				} else {
					q = own[cursor%len(own)]
					cursor++
					_, ack, err = c.pull(ctx, qs.names[q], 0)
				}
				if ackPulled(ctx, qs, q, ack, err, errs) {
					rec.add(time.Since(t0))
					done.Add(1)
				}
			}
		})
		r.msgs = done.Load()
		r.missing = missing.Load()
		r.retried = retried.Load()
		return recs
	})
}

// puller is the pulling half of mixed and e2e: it pulls counted messages
// from its queues, and long-polls when none is counted yet (a push may be
// answered after its message was already handed out). It stops when stop
// says so, shortening its last long poll so as not to overrun stopAt. onMsg
// sees each body before it is acked; cycle, when not nil, records pull+ack
// cycles of messages that were known to be waiting (so that time spent
// waiting for a push is not counted as pull latency).
func (b *bench) puller(ctx context.Context, c client, qs *queueSet, own []int, cursor int,
	stop func() bool, stopAt time.Time, onMsg func(body []byte, at time.Time), cycle *recorder,
	done *atomic.Int64, errs *errTally) {
	for ctx.Err() == nil && !stop() {
		q, reserved := pickReserved(qs, own, &cursor)
		wait := b.cfg.pullWait
		if !reserved {
			q = own[cursor%len(own)]
			cursor++
			if len(own) > 1 {
				// Several queues: poll each briefly rather than sit on one.
				wait = min(wait, 50*time.Millisecond)
			}
		}
		if left := time.Until(stopAt); left < wait {
			wait = left
		}
		// A long poll that expires just as a message is handed to it can
		// leave that message in flight until its timeout; very short
		// polls are not worth that risk: ask without waiting instead.
		if wait < 10*time.Millisecond {
			wait = 0
		}
		t0 := time.Now()
		body, ack, err := c.pull(ctx, qs.names[q], wait)
		if err != nil {
			if reserved {
				qs.remaining[q].Add(1)
			}
			errs.add(err)
			pauseAfterError(ctx)
			continue
		}
		if ack == nil {
			if reserved {
				qs.remaining[q].Add(1) // not visible yet: try again later
			}
			continue
		}
		if !reserved {
			qs.remaining[q].Add(-1)
		}
		onMsg(body, time.Now())
		if err := ack(ctx); err != nil {
			qs.markDirty(q)
			errs.add(err)
			continue
		}
		if reserved && cycle != nil {
			cycle.add(time.Since(t0))
		}
		done.Add(1)
	}
}

func (b *bench) mixedCell(ctx context.Context, t target, qs *queueSet, conc, size int) (cellResult, error) {
	return b.timedCell(ctx, wMixed, t, qs, conc, size, 2, func(ctx context.Context, r *cellResult, clients [][]client, deadline time.Time, errs *errTally) []*recorder {
		pushers, pullers := clients[0], clients[1]
		depth := t.depth()
		var pushRecs, recs []*recorder
		var pushed, done atomic.Int64
		stop := func() bool { return !time.Now().Before(deadline) }
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			pushRecs = recordedSlots(pushers, depth, func(w, k int, c client, rec *recorder) {
				b.pusher(ctx, c, qs, qs.assigned(w, conc), k, size, deadline, rec, &pushed, errs)
			})
		}()
		go func() {
			defer wg.Done()
			recs = recordedSlots(pullers, depth, func(w, k int, c client, rec *recorder) {
				onMsg := func([]byte, time.Time) {}
				b.puller(ctx, c, qs, qs.assigned(w, conc), k, stop, deadline, onMsg, rec, &done, errs)
			})
		}()
		wg.Wait()
		r.msgs = done.Load()
		r.pushed = pushed.Load()
		r.pushLat = merge(pushRecs)
		return recs
	})
}

// drain empties a queue set between cells (untimed), so that every cell
// starts from empty queues. Queues it cannot empty in time, or where a
// counted message went missing, are deleted and created again (only those:
// recreating 10,000 queues for one stray message would take a minute).
func (b *bench) drain(ctx context.Context, t target, qs *queueSet) error {
	if !t.stateful() || (qs.total() == 0 && !qs.anyDirty.Load()) {
		return b.cellErr(ctx)
	}
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, b.cfg.drainTimeout)
	defer cancel()
	// Clients share the queues when there are fewer queues than clients
	// (assigned), so one queue still drains at full speed.
	n := b.cfg.setupConc
	clients, err := b.openClients(dctx, t, n)
	if err != nil {
		return err
	}
	var missing, retried, done atomic.Int64
	var errs errTally
	slots(clients, 1, func(w, _ int, c client) {
		own := qs.assigned(w, n)
		cursor := 0
		for dctx.Err() == nil {
			q, ok := pickReserved(qs, own, &cursor)
			if !ok {
				return
			}
			_, ack, err := b.takeReserved(dctx, c, qs, q, &missing, &retried)
			if ackPulled(dctx, qs, q, ack, err, &errs) {
				done.Add(1)
			}
		}
	})
	closeClients(clients)
	b.log.Debug("drained", "target", t.name(), "msgs", done.Load(), "took", time.Since(start).Round(time.Millisecond))
	if err := b.cellErr(ctx); err != nil {
		return err
	}
	var redo []int
	for q := range qs.names {
		if qs.remaining[q].Load() != 0 || qs.dirty[q].Load() {
			redo = append(redo, q)
		}
	}
	if len(redo) > 0 {
		b.log.Warn("queues not drained cleanly: recreating them", "target", t.name(), "queues", len(redo),
			"left", qs.total(), "missing", missing.Load(), "errors", errs.n.Load(), "first_error", errs.firstString())
		err := parallel(ctx, len(redo), b.cfg.setupConc, func(ctx context.Context, i int) error {
			name := qs.names[redo[i]]
			if err := t.remove(ctx, name); err != nil {
				return err
			}
			return t.setup(ctx, name)
		})
		for _, q := range redo {
			qs.remaining[q].Store(0)
			qs.dirty[q].Store(false)
		}
		qs.anyDirty.Store(false)
		if err != nil {
			return fmt.Errorf("%s: recreating queues: %w", t.name(), err)
		}
	}
	return nil
}
