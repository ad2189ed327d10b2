package gateway

import (
	"sync"
	"time"
)

// ackedIDs remembers the delivery ids this gateway acked recently, so that a
// client retrying an ack whose answer it never got (a 504, a dropped
// connection) can be told the first one took effect. LMQ answers any reply
// to a finished delivery with 404, and so does the gateway; the difference is
// only in the error text (ErrAlreadyAcked), which a client can read as done.
//
// Bounded in both count and age: the oldest ids are forgotten first, and an
// id older than ackedKeep is answered as LMQ would (404, "not found").
type ackedIDs struct {
	mu    sync.Mutex
	at    map[string]time.Time
	order []string // insertion order, oldest first; a ring of cap ackedMax
	head  int
	now   func() time.Time
}

const (
	ackedMax  = 1 << 16
	ackedKeep = 10 * time.Minute
)

func newAckedIDs(now func() time.Time) *ackedIDs {
	if now == nil {
		now = time.Now
	}
	return &ackedIDs{at: make(map[string]time.Time), now: now}
}

func (a *ackedIDs) add(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.order) < ackedMax {
		a.order = append(a.order, id)
	} else {
		delete(a.at, a.order[a.head])
		a.order[a.head] = id
		a.head = (a.head + 1) % ackedMax
	}
	a.at[id] = a.now()
}

func (a *ackedIDs) has(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.at[id]
	return ok && a.now().Sub(t) < ackedKeep
}
