package accumulator

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

const (
	// workers bounds the closes a gateway runs at once; closes due meanwhile
	// wait for a slot.
	workers = 8
	// retryDelay is the pause before a failed close is tried again.
	retryDelay = time.Second
	// checkDelay is how long another gateway's close job may run before this
	// one asks whether that gateway is still alive.
	checkDelay = 2 * time.Second
	// rewatchDelay is the pause before the watch is set up again after it
	// ended.
	rewatchDelay = time.Second
)

// scheduler is the one goroutine of a gateway that knows every open window
// and close job (from a watch of the bucket) and starts each close when it is
// due: a min-heap of due times and a single timer, so that idle accumulating
// queues cost no goroutine or timer at all.
type scheduler struct {
	a       *Accumulator
	w       jetstream.KeyWatcher
	ptrs    map[string]ptrEntry // by key
	jobs    map[string]jobEntry // by key
	due     dueHeap
	running map[string]bool // window ids being handled here
	results chan result
	slots   chan struct{}
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
		a:       a,
		ptrs:    make(map[string]ptrEntry),
		jobs:    make(map[string]jobEntry),
		running: make(map[string]bool),
		results: make(chan result),
		slots:   make(chan struct{}, workers),
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
	w, err := s.a.kv.WatchFiltered(runCtx, []string{ptrPrefix + ">", jobPrefix + ">"})
	if err != nil {
		return fmt.Errorf("watch accumulation bucket: %w", err)
	}
	clear(s.ptrs)
	clear(s.jobs)
	s.due = s.due[:0]
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				_ = w.Stop()
				return errors.New("watch accumulation bucket: watcher closed")
			}
			if e == nil {
				s.w = w
				return nil
			}
			s.apply(e, true)
		case <-startCtx.Done():
			_ = w.Stop()
			return fmt.Errorf("load accumulation bucket: %w", startCtx.Err())
		}
	}
}

func (s *scheduler) loop(ctx context.Context) {
	defer func() {
		if s.w != nil {
			_ = s.w.Stop()
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var updates <-chan jetstream.KeyValueEntry
		if s.w != nil {
			updates = s.w.Updates()
		}
		if len(s.due) > 0 {
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
				s.apply(e, false)
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
		case now := <-timer.C:
			s.fire(ctx, now)
		}
	}
}

// rewatch sets the watch up again after the watcher ended (it survives
// reconnects, so this is rare); windows and jobs are reloaded from scratch.
func (s *scheduler) rewatch(ctx context.Context) {
	_ = s.w.Stop()
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
func (s *scheduler) apply(e jetstream.KeyValueEntry, initial bool) {
	key, rev := e.Key(), e.Revision()
	removed := e.Operation() != jetstream.KeyValuePut
	switch {
	case strings.HasPrefix(key, ptrPrefix):
		enc := key[len(ptrPrefix):]
		if removed {
			delete(s.ptrs, key)
			s.a.setCache(enc, nil, rev)
			return
		}
		var w window
		if err := json.Unmarshal(e.Value(), &w); err != nil {
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
		if removed {
			delete(s.jobs, key)
			return
		}
		var j job
		if err := json.Unmarshal(e.Value(), &j); err != nil {
			s.a.log.Error("ignoring unreadable close job", "key", key, "err", err)
			return
		}
		je := jobEntry{j: j, rev: rev}
		s.jobs[key] = je
		s.scheduleJob(key, je, initial)
	}
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
	for len(s.due) > 0 && !s.due[0].at.After(now) {
		d := heap.Pop(&s.due).(due)
		if p, ok := s.ptrs[d.key]; ok && p.rev == d.rev && !s.running[p.w.ID] {
			enc := d.key[len(ptrPrefix):]
			s.start(ctx, p.w.ID, enc, d.key, func(ctx context.Context) (time.Time, error) {
				return time.Time{}, s.a.closeDue(ctx, enc, p)
			})
			continue
		}
		if je, ok := s.jobs[d.key]; ok && je.rev == d.rev && !s.running[je.j.ID] {
			enc, _, _ := parseJobKey(d.key)
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
		select {
		case s.slots <- struct{}{}:
			again, err := fn(ctx)
			<-s.slots
			r.again = again
			if err != nil && ctx.Err() == nil {
				s.a.log.Warn("accumulation window not closed yet; retrying", "key", key, "err", err)
				r.again = time.Now().Add(retryDelay)
			}
		case <-ctx.Done():
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
