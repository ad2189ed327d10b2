package rpc

import (
	"context"
	"sync"
)

// sharedBytes is the server-wide budget of request bytes held at once, across
// all connections (Options.MaxTotalInFlightBytes). Connections read a new
// request only while the budget has room; a request read is charged in full
// (it is in memory already) and released when it has been answered. So the
// bytes held exceed the budget by at most one request per connection that
// was reading when the budget ran out. A nil *sharedBytes is no limit.
type sharedBytes struct {
	mu    sync.Mutex
	limit int
	used  int
	wake  chan struct{} // closed and replaced on every release
}

func newSharedBytes(limit int) *sharedBytes {
	if limit <= 0 {
		return nil
	}
	return &sharedBytes{limit: limit, wake: make(chan struct{})}
}

// waitRoom blocks until the bytes held are below the limit, or ctx ends.
func (b *sharedBytes) waitRoom(ctx context.Context) error {
	if b == nil {
		return nil
	}
	return waitUntil(ctx, &b.mu, func() (bool, <-chan struct{}) {
		return b.used < b.limit, b.wake
	})
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
	b.mu.Unlock()
}

func (b *sharedBytes) release(n int) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// held is the number of bytes charged and not released.
func (b *sharedBytes) held() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
