package gateway

import (
	"container/heap"
	"sync"
	"time"
)

// wakeups are the core's timed pokes at queues, all on one timer and one
// goroutine: the wake-up of a queue's waiting clients when a delayed push
// falls due, and a dispatcher's retry of a refused pull request. (A timer
// each would cost a goroutine each when they fire, unbounded in number with
// delayed pushes, and none of them would be waited for by Close.)
//
// A wake-up is only a shortcut: the re-poll (Config.RepollInterval) finds a
// due message without it. So wake-ups for one queue that fall due within
// wakeSlot of each other are merged, and beyond maxWakeups pending ones new
// ones are left out (counted in the log) rather than growing without bound.
type wakeups struct {
	g    *Gateway
	mu   sync.Mutex
	h    wakeHeap
	set  map[wakeKey]struct{} // pending queue wake-ups, for merging
	kick chan struct{}        // the earliest entry changed
	left int                  // wake-ups left out since the last log line
}

const (
	wakeSlot   = 100 * time.Millisecond
	maxWakeups = 1 << 16
)

// wake is one entry: notify queue (every gateway's waiters, Gateway.Notify)
// or, with q set, poke that dispatcher only (queueState.notify).
type wake struct {
	at    time.Time
	queue string
	q     *queueState
}

type wakeKey struct {
	queue string
	slot  int64
}

type wakeHeap []wake

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h wakeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *wakeHeap) Push(x any)        { *h = append(*h, x.(wake)) }
func (h *wakeHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = wake{}
	*h = old[:len(old)-1]
	return w
}

func newWakeups(g *Gateway) *wakeups {
	return &wakeups{g: g, set: make(map[wakeKey]struct{}), kick: make(chan struct{}, 1)}
}

// wakeAt has queue's waiting clients, on every gateway, look again at about
// at (a delayed push falling due; JetStream fires schedules up to about a
// second late, the caller adds its margin). It is rounded up to wakeSlot.
func (g *Gateway) wakeAt(queue string, at time.Time) {
	slot := (at.UnixNano() + int64(wakeSlot) - 1) / int64(wakeSlot)
	k := wakeKey{queue: queue, slot: slot}
	w := g.wakes
	w.mu.Lock()
	if _, ok := w.set[k]; ok {
		w.mu.Unlock()
		return
	}
	if !w.addLocked(wake{at: time.Unix(0, slot*int64(wakeSlot)), queue: queue}) {
		w.mu.Unlock()
		return
	}
	w.set[k] = struct{}{}
	w.mu.Unlock()
}

// retryAt pokes q's dispatcher again at about at.
func (w *wakeups) retryAt(q *queueState, at time.Time) {
	w.mu.Lock()
	w.addLocked(wake{at: at, q: q})
	w.mu.Unlock()
}

func (w *wakeups) addLocked(e wake) bool {
	if len(w.h) >= maxWakeups {
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

// run fires the wake-ups as they fall due, until the gateway's lifetime ends.
func (w *wakeups) run() {
	defer w.g.bg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		var due []wake
		now := time.Now()
		w.mu.Lock()
		for len(w.h) > 0 && !w.h[0].at.After(now) {
			e := heap.Pop(&w.h).(wake)
			if e.q == nil {
				delete(w.set, wakeKey{queue: e.queue, slot: e.at.UnixNano() / int64(wakeSlot)})
			}
			due = append(due, e)
		}
		next := time.Hour
		if len(w.h) > 0 {
			next = w.h[0].at.Sub(now)
		}
		left := w.left
		if left > 0 {
			if _, ok := w.g.noise.Allow("wake-ups full"); ok {
				w.left = 0
			} else {
				left = 0
			}
		}
		w.mu.Unlock()
		if left > 0 {
			w.g.log.Warn("too many pending wake-ups; waiting clients find those messages at the next re-poll",
				"left_out", left, "limit", maxWakeups)
		}
		for _, e := range due {
			if e.q != nil {
				e.q.notify()
			} else {
				w.g.Notify(e.queue)
			}
		}
		t.Reset(next)
		select {
		case <-w.g.work.Context().Done():
			return
		case <-w.kick:
		case <-t.C:
		}
	}
}
