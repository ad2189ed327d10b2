// Package wakeups holds the core's timed pokes, all on one timer and one
// goroutine: the wake-up of a queue's waiting clients when a delayed push
// falls due, and a dispatcher's retry of a refused pull request. (A timer
// each would cost a goroutine each when they fire, unbounded in number with
// delayed pushes, and none of them would be waited for by the core's Close.)
//
// A wake-up is only a shortcut: the core's re-poll finds a due message
// without it. So wake-ups for one target that fall due within Slot of each
// other may be merged (AtSlot), and beyond Max pending ones new ones are left
// out (counted in the log) rather than growing without bound.
package wakeups

import (
	"container/heap"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/noise"
	"github.com/lmq-gateway/lmq-gateway/internal/testsignal"
)

const (
	// Slot is the precision of merged wake-ups (AtSlot).
	Slot = 100 * time.Millisecond
	// Max bounds the pending wake-ups.
	Max = 1 << 16
)

// Timer fires wake-ups of targets T (a comparable value naming what to
// poke) as they fall due. Create it with New and Run it on a goroutine its
// owner waits for.
type Timer[T comparable] struct {
	fire  func(T)
	log   *slog.Logger
	noise *noise.Limiter

	mu   sync.Mutex
	h    wakeHeap[T]
	set  map[slotKey[T]]struct{} // pending merged wake-ups
	kick chan struct{}           // the earliest entry changed
	left int                     // wake-ups left out since the last log line

	// TestFired reports each wake-up fired, once fire returned, to a test
	// that turned it on (internal/testsignal); off otherwise.
	TestFired testsignal.Signal[T]
}

type wake[T comparable] struct {
	at     time.Time
	target T
	merged bool // in set (AtSlot)
}

type slotKey[T comparable] struct {
	target T
	slot   int64
}

type wakeHeap[T comparable] []wake[T]

func (h wakeHeap[T]) Len() int           { return len(h) }
func (h wakeHeap[T]) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h wakeHeap[T]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *wakeHeap[T]) Push(x any)        { *h = append(*h, x.(wake[T])) }
func (h *wakeHeap[T]) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = wake[T]{}
	*h = old[:len(old)-1]
	return w
}

// New returns a Timer that calls fire with each target as it falls due (on
// Run's goroutine), and logs through log, at most as often as noise allows,
// the wake-ups left out when full.
func New[T comparable](fire func(T), log *slog.Logger, noise *noise.Limiter) *Timer[T] {
	return &Timer[T]{fire: fire, log: log, noise: noise, set: make(map[slotKey[T]]struct{}), kick: make(chan struct{}, 1)}
}

// AtSlot pokes target at about at, rounded up to Slot; a wake-up of target
// pending in the same slot already stands for this one.
func (w *Timer[T]) AtSlot(target T, at time.Time) {
	slot := (at.UnixNano() + int64(Slot) - 1) / int64(Slot)
	k := slotKey[T]{target: target, slot: slot}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.set[k]; ok {
		return
	}
	if w.addLocked(wake[T]{at: time.Unix(0, slot*int64(Slot)), target: target, merged: true}) {
		w.set[k] = struct{}{}
	}
}

// At pokes target at about at.
func (w *Timer[T]) At(target T, at time.Time) {
	w.mu.Lock()
	w.addLocked(wake[T]{at: at, target: target})
	w.mu.Unlock()
}

func (w *Timer[T]) addLocked(e wake[T]) bool {
	if len(w.h) >= Max {
		w.left++
		return false
	}
	heap.Push(&w.h, e)
	if !w.h[0].at.Before(e.at) { // the new earliest: the timer must move
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// Run fires the wake-ups as they fall due, until ctx ends.
func (w *Timer[T]) Run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		var due []wake[T]
		now := time.Now()
		w.mu.Lock()
		for len(w.h) > 0 && !w.h[0].at.After(now) {
			e := heap.Pop(&w.h).(wake[T])
			if e.merged {
				delete(w.set, slotKey[T]{target: e.target, slot: e.at.UnixNano() / int64(Slot)})
			}
			due = append(due, e)
		}
		next := time.Hour
		if len(w.h) > 0 {
			next = w.h[0].at.Sub(now)
		}
		left := w.left
		if left > 0 {
			if _, ok := w.noise.Allow("wake-ups full"); ok {
				w.left = 0
			} else {
				left = 0
			}
		}
		w.mu.Unlock()
		if left > 0 {
			w.log.Warn("too many pending wake-ups; waiting clients find those messages at the next re-poll",
				"left_out", left, "limit", Max)
		}
		for _, e := range due {
			w.fire(e.target)
			w.TestFired.Signal(e.target)
		}
		t.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-t.C:
		}
	}
}
