// Package recent remembers ids seen lately, bounded in both count and age:
// the core's recently acked delivery ids, so that a client retrying an ack
// whose answer it never got (a 504, a dropped connection) can be told the
// first one took effect.
package recent

import (
	"sync"
	"time"
)

// IDs is a set of ids that forgets the oldest first, beyond a count, and
// answers no for an id older than an age.
type IDs struct {
	max  int
	keep time.Duration
	now  func() time.Time

	mu    sync.Mutex
	at    map[string]time.Time
	order []string // insertion order, oldest first; a ring of cap max
	head  int
}

// NewIDs remembers up to max ids, each for keep; now is the clock (time.Now
// when nil).
func NewIDs(max int, keep time.Duration, now func() time.Time) *IDs {
	if now == nil {
		now = time.Now
	}
	return &IDs{max: max, keep: keep, now: now, at: make(map[string]time.Time)}
}

// Add remembers id, forgetting the oldest one when full.
func (a *IDs) Add(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.order) < a.max {
		a.order = append(a.order, id)
	} else {
		delete(a.at, a.order[a.head])
		a.order[a.head] = id
		a.head = (a.head + 1) % a.max
	}
	a.at[id] = a.now()
}

// Has reports whether id was added, not forgotten, within keep.
func (a *IDs) Has(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[id]
	return ok && a.now().Sub(t) < a.keep
}
