package rpc

import (
	"context"
	"sync"
)

// sharedBytes is a server-wide budget of bytes held at once, across all
// connections: the request bytes (Options.MaxTotalInFlightBytes), or the
// answer bytes not yet written (Options.MaxTotalAnswerBytes).
//
// Connections read a new request only while the budget has room; a request
// read, or an answer handed to an outbox, is charged in full (it is in
// memory already) and released when it has been answered, or written. So
// the bytes held exceed the budget by at most one request per connection
// that was reading when the budget ran out.
//
// Answers that may be large and are not pulls (the listings:
// get_default_props, messages) are also counted before they are built: the
// handler sets their estimated size aside (reserve) and builds the answer
// only once it fits beside the bytes held and set aside, so that many
// connections building listings at once cannot pass the budget together.
// A nil *sharedBytes is no limit.
type sharedBytes struct {
	mu       sync.Mutex
	limit    int
	used     int
	reserved int           // set aside for answers being built (reserve)
	wake     chan struct{} // closed and replaced on every release
	// peak is the most bytes held and set aside at once: what the bound
	// held to (the tests check it).
	peak int
}

func newSharedBytes(limit int) *sharedBytes {
	if limit <= 0 {
		return nil
	}
	return &sharedBytes{limit: limit, wake: make(chan struct{})}
}

// waitRoom blocks until the bytes held and set aside are below the limit,
// or ctx ends.
func (b *sharedBytes) waitRoom(ctx context.Context) error {
	if b == nil {
		return nil
	}
	return waitUntil(ctx, &b.mu, b.roomLocked)
}

// room reports whether the bytes held and set aside are below the limit;
// when they are not, the channel closed on the next release.
func (b *sharedBytes) room() (bool, <-chan struct{}) {
	if b == nil {
		return true, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.roomLocked()
}

func (b *sharedBytes) roomLocked() (bool, <-chan struct{}) {
	if b.used+b.reserved < b.limit {
		return true, nil
	}
	return false, b.wake
}

// tryReserve sets n bytes aside for an answer about to be built, if they
// fit beside the bytes held and set aside, or if nothing is set aside and
// the bytes held are below the limit (one answer larger than the room left
// still gets built, alone). When it does not, it returns the channel
// closed on the next release.
func (b *sharedBytes) tryReserve(n int) (bool, <-chan struct{}) {
	if b == nil {
		return true, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+b.reserved+n <= b.limit || (b.reserved == 0 && b.used < b.limit) {
		b.reserved += n
		b.peak = max(b.peak, b.used+b.reserved)
		return true, nil
	}
	return false, b.wake
}

// exchange gives back n bytes set aside by tryReserve and charges the
// answer built in their place, of charged bytes (0: none).
func (b *sharedBytes) exchange(n, charged int) {
	if b == nil || n == 0 && charged == 0 {
		return
	}
	b.mu.Lock()
	b.reserved -= n
	b.used += charged
	b.peak = max(b.peak, b.used+b.reserved)
	b.wakeLocked()
	b.mu.Unlock()
}

// waitUntil is a condition wait that ctx can end. It calls ready with mu
// held until it reports true; when it does not, it waits, with mu unlocked,
// until the channel ready returned is closed (by whoever changes what ready
// looks at) or ctx ends.
func waitUntil(ctx context.Context, mu *sync.Mutex, ready func() (bool, <-chan struct{})) error {
	for {
		mu.Lock()
		ok, wake := ready()
		mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// charge adds n bytes held, even beyond the limit: they are in memory.
func (b *sharedBytes) charge(n int) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.used += n
	b.peak = max(b.peak, b.used+b.reserved)
	b.mu.Unlock()
}

func (b *sharedBytes) release(n int) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.wakeLocked()
	b.mu.Unlock()
}

func (b *sharedBytes) wakeLocked() {
	close(b.wake)
	b.wake = make(chan struct{})
}

// held is the number of bytes charged and not released, and of those set
// aside and not given back.
func (b *sharedBytes) held() (used, reserved int) {
	if b == nil {
		return 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.reserved
}

// highest is the most bytes held and set aside at once so far.
func (b *sharedBytes) highest() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}
