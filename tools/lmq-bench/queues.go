package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// queueSet is the queues of one target for a series of cells, with the
// bench's own count of the messages each holds: pullers use it to know where
// messages are and when a queue is drained, without asking the server.
type queueSet struct {
	names     []string
	remaining []atomic.Int64
	// dirty: a counted message went missing or an ack failed, so the queue
	// may hold messages the count does not know of (they would come back
	// later with stale timestamps). drain recreates such queues.
	dirty    []atomic.Bool
	anyDirty atomic.Bool
}

func newQueueSet(prefix string, n int) *queueSet {
	qs := &queueSet{names: make([]string, n), remaining: make([]atomic.Int64, n), dirty: make([]atomic.Bool, n)}
	for i := range qs.names {
		qs.names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return qs
}

// assigned spreads C clients over the queues: with at least as many queues as
// clients, client w owns the queues j with j%C == w; otherwise clients share,
// client w using queue w%Q.
func (qs *queueSet) assigned(w, clients int) []int {
	n := len(qs.names)
	if n < clients {
		return []int{w % n}
	}
	var out []int
	for j := w; j < n; j += clients {
		out = append(out, j)
	}
	return out
}

func (qs *queueSet) total() int64 {
	var t int64
	for i := range qs.remaining {
		t += qs.remaining[i].Load()
	}
	return t
}

func (qs *queueSet) markDirty(q int) {
	qs.dirty[q].Store(true)
	qs.anyDirty.Store(true)
}

// reserve takes one counted message of queue q for a puller, so that
// pullers sharing a queue never expect the same message.
func (qs *queueSet) reserve(q int) bool {
	if qs.remaining[q].Add(-1) >= 0 {
		return true
	}
	qs.remaining[q].Add(1)
	return false
}

// parallel runs fn over the queue indexes with conc goroutines and returns
// the first error.
func parallel(ctx context.Context, n, conc int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range min(conc, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		// The parent was cancelled (not by an fn error).
		return ctx.Err()
	}
	return first
}

// Message bodies: the first 8 bytes carry the push time (nanoseconds since
// the bench's epoch, on the monotonic clock), for push→pull latency.
const tsLen = 8

func newBody(size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

func stamp(body []byte, epoch time.Time, at time.Time) {
	binary.BigEndian.PutUint64(body[:tsLen], uint64(at.Sub(epoch)))
}

// stampedAt reads a body's push time; ok is false for bodies without one.
func stampedAt(body []byte, epoch time.Time) (time.Time, bool) {
	if len(body) < tsLen {
		return time.Time{}, false
	}
	ns := int64(binary.BigEndian.Uint64(body[:tsLen]))
	if ns <= 0 || ns > int64(24*time.Hour) {
		return time.Time{}, false
	}
	return epoch.Add(time.Duration(ns)), true
}
