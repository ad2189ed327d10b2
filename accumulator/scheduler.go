package accumulator

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

const (
	// workers bounds the closes a gateway runs at once; closes due meanwhile
	// stay in the heap until a worker is free.
	workers = 8
	// retryDelay is the pause before a failed close is tried again.
	retryDelay = time.Second
	// checkDelay is how long another gateway's close job may run before this
	// one asks whether that gateway is still alive.
	checkDelay = 2 * time.Second
	// rewatchDelay is the pause before the watch is set up again after it
	// ended.
	rewatchDelay = time.Second
	// orderWait is how often a close waits for the close of an earlier
	// window of the same queue to store its compound message.
	orderWait = 20 * time.Millisecond
)

// scheduler is the one goroutine of a gateway that knows every open window
// and close job (from a watch of the bucket) and starts each close when it is
// due: a min-heap of due times and a single timer, so that idle accumulating
// queues cost no goroutine or timer at all.
type scheduler struct {
	a    *Accumulator
	w    *kv.Watcher
	ptrs map[string]ptrEntry // by key
	jobs map[string]jobEntry // by key
	// unpublished are the windows (id → open time) of each queue (by
	// encoded name) whose close job has not yet stored its compound: a later
	// window of the queue waits for them, so that compounds are available
	// in window order.
	unpublished map[string]map[string]int64
	due         dueHeap
	running     map[string]bool // window ids being handled here
	results     chan result
}

type ptrEntry struct {
	w   window
	rev uint64
}

type jobEntry struct {
	j   job
	rev uint64
}

// result is what a worker reports when it is done with a window.
type result struct {
	window string
	enc    string
	key    string
	// again is when key should be looked at again; zero: never.
	again time.Time
}

// newScheduler watches the bucket and loads its current state; startCtx
// bounds the loading, runCtx the watch.
func newScheduler(startCtx, runCtx context.Context, a *Accumulator) (*scheduler, error) {
	s := &scheduler{
		a:           a,
		ptrs:        make(map[string]ptrEntry),
		jobs:        make(map[string]jobEntry),
		unpublished: make(map[string]map[string]int64),
		running:     make(map[string]bool),
		results:     make(chan result),
	}
	if err := s.watch(startCtx, runCtx); err != nil {
		return nil, err
	}
	return s, nil
}

// watch (re)starts the watch and applies the current state, which it replays
// first; jobs found there are checked at once (their owner may be a gateway
// that died, such as this one before a restart).
func (s *scheduler) watch(startCtx, runCtx context.Context) error {
	w, err := s.a.kv.Watch(runCtx, ptrPrefix+">", jobPrefix+">")
	if err != nil {
		return fmt.Errorf("watch accumulation bucket: %w", err)
	}
	clear(s.ptrs)
	clear(s.jobs)
	clear(s.unpublished)
	s.due = s.due[:0]
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				w.Stop()
				return errors.New("watch accumulation bucket: watcher closed")
			}
			if e == nil {
				s.w = w
				return nil
			}
			s.apply(*e, true)
		case <-startCtx.Done():
			w.Stop()
			return fmt.Errorf("load accumulation bucket: %w", startCtx.Err())
		}
	}
}

func (s *scheduler) loop(ctx context.Context) {
	defer func() {
		if s.w != nil {
			s.w.Stop()
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var updates <-chan *kv.Entry
		if s.w != nil {
			updates = s.w.Updates()
		}
		// With every worker busy, the next result re-arms the timer.
		if len(s.due) > 0 && len(s.running) < workers {
			timer.Reset(time.Until(s.due[0].at))
		} else {
			timer.Reset(time.Hour)
		}
		select {
		case <-ctx.Done():
			return
		case e, ok := <-updates:
			if !ok {
				s.rewatch(ctx)
				continue
			}
			if e != nil {
				s.apply(*e, false)
				s.a.TestSignals.ChangeApplied.Signal(e.Key)
			}
		case r := <-s.results:
			delete(s.running, r.window)
			jk := jobKey(r.enc, r.window)
			if !r.again.IsZero() {
				// A failed close of a window is resumed from its job.
				s.scheduleKey(r.key, r.again)
				if jk != r.key {
					s.scheduleKey(jk, r.again)
				}
			} else if je, ok := s.jobs[jk]; ok && je.j.Owner != s.a.id {
				// Another gateway's job, not scheduled while the window
				// was busy here.
				s.scheduleJob(jk, je, false)
			}
			s.a.TestSignals.WindowClosed.Signal(Closed{Window: r.window, Retry: !r.again.IsZero(), Running: len(s.running)})
		case now := <-timer.C:
			s.fire(ctx, now)
		}
	}
}

// rewatch sets the watch up again after the watcher ended (it survives
// reconnects, so this is rare); windows and jobs are reloaded from scratch.
func (s *scheduler) rewatch(ctx context.Context) {
	s.w.Stop()
	for ctx.Err() == nil {
		s.a.log.Warn("accumulation watch ended; restarting it")
		sctx, cancel := context.WithTimeout(ctx, opTimeout)
		err := s.watch(sctx, ctx)
		cancel()
		if err == nil {
			return
		}
		s.a.log.Error("cannot watch accumulation windows", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(rewatchDelay):
		}
	}
	// Only reached when stopping: keep loop's select off the closed watcher.
	s.w = nil
}

// apply updates the state from one watched entry.
func (s *scheduler) apply(e kv.Entry, initial bool) {
	key, rev := e.Key, e.Revision
	removed := e.Op != kv.OpPut
	switch {
	case strings.HasPrefix(key, ptrPrefix):
		enc := key[len(ptrPrefix):]
		if removed {
			delete(s.ptrs, key)
			s.a.setCache(enc, nil, rev)
			return
		}
		var w window
		if err := json.Unmarshal(e.Value, &w); err != nil {
			s.a.log.Error("ignoring unreadable window", "key", key, "err", err)
			return
		}
		s.ptrs[key] = ptrEntry{w: w, rev: rev}
		s.a.setCache(enc, &w, rev)
		at := w.deadline()
		if w.Opener != s.a.id {
			at = at.Add(s.a.grace)
		}
		s.push(at, key, rev)
	case strings.HasPrefix(key, jobPrefix):
		enc, id, ok := parseJobKey(key)
		if !ok {
			return
		}
		if removed {
			delete(s.jobs, key)
			s.published(enc, id)
			return
		}
		var j job
		if err := json.Unmarshal(e.Value, &j); err != nil {
			s.a.log.Error("ignoring unreadable close job", "key", key, "err", err)
			return
		}
		je := jobEntry{j: j, rev: rev}
		s.jobs[key] = je
		if j.State == stPublished {
			s.published(enc, id)
		} else {
			if s.unpublished[enc] == nil {
				s.unpublished[enc] = make(map[string]int64)
			}
			s.unpublished[enc][id] = j.Opened
		}
		s.scheduleJob(key, je, initial)
	}
}

func (s *scheduler) published(enc, id string) {
	delete(s.unpublished[enc], id)
	if len(s.unpublished[enc]) == 0 {
		delete(s.unpublished, enc)
	}
}

// earlierPending reports whether a window of the queue opened before opened
// still waits for its compound to be stored.
func (s *scheduler) earlierPending(enc string, opened int64) bool {
	for _, o := range s.unpublished[enc] {
		if o < opened {
			return true
		}
	}
	return false
}

// scheduleJob decides when to look at a job: a job of this gateway's that
// no worker runs here failed and is retried soon; another gateway's is
// checked after checkDelay (at once when loading, as its owner may have died
// with the previous run of this process).
func (s *scheduler) scheduleJob(key string, je jobEntry, initial bool) {
	if s.running[je.j.ID] {
		return
	}
	now := time.Now()
	switch {
	case initial:
		s.push(now, key, je.rev)
	case je.j.Owner == s.a.id:
		s.push(now.Add(retryDelay), key, je.rev)
	default:
		s.push(now.Add(checkDelay), key, je.rev)
	}
}

// scheduleKey looks at key again at t, whatever its current revision.
func (s *scheduler) scheduleKey(key string, t time.Time) {
	if p, ok := s.ptrs[key]; ok {
		s.push(t, key, p.rev)
	} else if j, ok := s.jobs[key]; ok {
		s.push(t, key, j.rev)
	}
}

func (s *scheduler) push(at time.Time, key string, rev uint64) {
	heap.Push(&s.due, due{at: at, key: key, rev: rev})
}

// fire starts the work that is due. Entries whose key changed since they
// were pushed are dropped: the change pushed its own entry.
func (s *scheduler) fire(ctx context.Context, now time.Time) {
	for len(s.due) > 0 && len(s.running) < workers && !s.due[0].at.After(now) {
		d := heap.Pop(&s.due).(due)
		if p, ok := s.ptrs[d.key]; ok && p.rev == d.rev && !s.running[p.w.ID] {
			enc := d.key[len(ptrPrefix):]
			if s.earlierPending(enc, p.w.Opened) {
				s.push(now.Add(orderWait), d.key, d.rev)
				continue
			}
			s.start(ctx, p.w.ID, enc, d.key, func(ctx context.Context) (time.Time, error) {
				return s.a.closeDue(ctx, enc, p)
			})
			continue
		}
		if je, ok := s.jobs[d.key]; ok && je.rev == d.rev && !s.running[je.j.ID] {
			enc, _, _ := parseJobKey(d.key)
			if je.j.State != stPublished && s.earlierPending(enc, je.j.Opened) {
				s.push(now.Add(orderWait), d.key, d.rev)
				continue
			}
			s.start(ctx, je.j.ID, enc, d.key, func(ctx context.Context) (time.Time, error) {
				return s.a.checkJob(ctx, d.key, enc, je)
			})
		}
	}
}

// start runs fn for a window on a worker goroutine; it exists only while
// the close runs.
func (s *scheduler) start(ctx context.Context, window, enc, key string, fn func(context.Context) (time.Time, error)) {
	s.running[window] = true
	s.a.wg.Add(1)
	go func() {
		defer s.a.wg.Done()
		r := result{window: window, enc: enc, key: key}
		again, err := fn(ctx)
		r.again = again
		if err != nil && ctx.Err() == nil {
			s.a.log.Warn("accumulation window not closed yet; retrying", "key", key, "err", err)
			r.again = time.Now().Add(retryDelay)
		}
		select {
		case s.results <- r:
		case <-ctx.Done():
		}
	}()
}

type due struct {
	at  time.Time
	key string
	rev uint64
}

// dueHeap is a min-heap of due times (container/heap).
type dueHeap []due

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(due)) }
func (h *dueHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	return d
}
