package inflight

import (
	"context"
	"log/slog"
	"sync"
)

// minPrune is the size from which a Bound drops the deliveries answered
// elsewhere (on another connection, or timed out) as it grows.
const minPrune = 64

// Bound is the set of deliveries handed out over one client connection and
// not answered on it (gateway.Bound says what for). It holds no message
// bodies. A Bound is safe for concurrent use.
type Bound struct {
	giveBack func(*Entry) bool
	log      *slog.Logger
	mu       sync.Mutex
	ds       map[string]*Entry
	pruneAt  int
	released bool
}

// NewBound returns an empty Bound; giveBack releases an entry without
// counting a retry, reporting whether it was still unanswered.
func NewBound(giveBack func(*Entry) bool, log *slog.Logger) *Bound {
	return &Bound{giveBack: giveBack, log: log, ds: make(map[string]*Entry), pruneAt: minPrune}
}

// Add binds e to the connection. An entry added after Release (a handler
// that finished after its connection closed) is released at once. Entries
// already answered (a timeout of 0) are ignored.
func (b *Bound) Add(e *Entry) {
	if e == nil || e.Finished() {
		return
	}
	b.mu.Lock()
	if b.released {
		b.mu.Unlock()
		b.giveBack(e)
		return
	}
	b.ds[e.ID] = e
	if len(b.ds) >= b.pruneAt {
		// A client may answer on another connection (LMQ clients that
		// reconnect do): forget what is no longer in flight, so that the set
		// follows the deliveries actually held, not those ever handed out.
		for id, x := range b.ds {
			if x.Finished() {
				delete(b.ds, id)
			}
		}
		b.pruneAt = max(minPrune, 2*len(b.ds))
	}
	b.mu.Unlock()
}

// Done forgets the delivery id: the connection's client answered it.
func (b *Bound) Done(id string) {
	b.mu.Lock()
	delete(b.ds, id)
	b.mu.Unlock()
}

// Len is the number of deliveries bound (some may have been answered
// elsewhere since).
func (b *Bound) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.ds)
}

// Release gives back every bound delivery still unanswered; later Adds
// release at once. It returns the number given back and stops early when
// ctx ends.
func (b *Bound) Release(ctx context.Context) int {
	b.mu.Lock()
	b.released = true
	ds := b.ds
	b.ds = nil
	b.mu.Unlock()
	n := 0
	for _, e := range ds {
		if ctx.Err() != nil {
			break
		}
		if b.giveBack(e) {
			n++
		}
	}
	if n > 0 {
		b.log.Debug("released deliveries of a closed connection", "count", n)
	}
	return n
}
