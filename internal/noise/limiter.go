// Package noise keeps repetitive log lines to one per interval and kind: a
// NATS leader election makes every queue's requests fail at once, and the
// operator needs one line saying so, not hundreds a second.
package noise

import (
	"sync"
	"time"
)

// Limiter counts the lines of each kind it lets through and holds back.
type Limiter struct {
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	last map[string]time.Time
	skip map[string]int
}

// NewLimiter lets one line of a kind through per interval; now is the clock
// (time.Now when nil).
func NewLimiter(interval time.Duration, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{interval: interval, now: now, last: make(map[string]time.Time), skip: make(map[string]int)}
}

// Allow reports whether a line of kind key may be logged now, and how many
// were suppressed since the last one that was.
func (l *Limiter) Allow(key string) (suppressed int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.now()
	if last, seen := l.last[key]; seen && t.Sub(last) < l.interval {
		l.skip[key]++
		return 0, false
	}
	l.last[key] = t
	n := l.skip[key]
	delete(l.skip, key)
	return n, true
}
