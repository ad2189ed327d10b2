package ops

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// Core is what package ops needs of the core; *gateway.Gateway implements it.
type Core interface {
	QueueNames() []string
	// QueueStatus is one queue's sizes and placement (ErrNotFound when it
	// does not exist).
	QueueStatus(ctx context.Context, name string) (gateway.QueueStatus, error)
	InFlight() int
	Closing() <-chan struct{}
	// ProbeStore checks that JetStream answers and stores (readiness).
	ProbeStore(ctx context.Context) error
	// StoreFailure is a standing failure to store (a full disk), nil when
	// there is none; StoreFailures counts stores that failed so.
	StoreFailure() error
	StoreFailures() uint64
	// WaitingPulls counts the pulls (HTTP and RPC) that may wait now.
	WaitingPulls() int
}

var _ Core = (*gateway.Gateway)(nil)

// QueueView is what JetStream knows about a queue, plus the servers holding it.
type QueueView = gateway.QueueStatus

// collectTimeout bounds one collection; queues not reached by then are left
// out of it.
const collectTimeout = 30 * time.Second

// inventory asks JetStream about every queue, for /stats, /metrics and
// StatsD. Each queue costs a few JetStream requests, so a collection is shared
// by everyone asking within ttl, runs a bounded number of requests at once,
// and covers at most maxQueues queues.
type inventory struct {
	core      Core
	log       *slog.Logger
	ttl       time.Duration
	workers   int
	maxQueues int
	timeout   time.Duration

	mu      sync.Mutex
	at      time.Time
	names   []string // the queues when cached was collected
	cached  []QueueView
	running chan struct{} // closed when the running collection ends; nil if none
}

// collect returns the queues' views, sorted by name, from a collection made
// at most ttl ago while the same queues existed, or a fresh one. Queues JetStream could not answer about
// are left out.
func (inv *inventory) collect(ctx context.Context) ([]QueueView, error) {
	for {
		names := inv.core.QueueNames()
		inv.mu.Lock()
		if inv.cached != nil && time.Since(inv.at) < inv.ttl && slices.Equal(names, inv.names) {
			out := inv.cached
			inv.mu.Unlock()
			return out, nil
		}
		if running := inv.running; running != nil {
			inv.mu.Unlock()
			select {
			case <-running:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		inv.running = done
		inv.mu.Unlock()

		// The collection serves every waiter, so it must not end with the
		// first caller's context; it is bounded by its own timeout instead.
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), collectTimeout)
		views := inv.gather(gctx, names)
		cancel()
		inv.mu.Lock()
		inv.cached, inv.names, inv.at, inv.running = views, names, time.Now(), nil
		inv.mu.Unlock()
		close(done)
		return views, nil
	}
}

func (inv *inventory) gather(ctx context.Context, names []string) []QueueView {
	if len(names) > inv.maxQueues {
		inv.log.Warn("more queues than statistics cover", "queues", len(names), "max", inv.maxQueues)
		names = names[:inv.maxQueues]
	}
	views := make([]QueueView, len(names))
	ok := make([]bool, len(names))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(inv.workers, len(names)) {
		wg.Go(func() {
			for i := range jobs {
				views[i], ok[i] = inv.one(ctx, names[i])
			}
		})
	}
	for i := range names {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	out := make([]QueueView, 0, len(names))
	for i, v := range views {
		if ok[i] {
			out = append(out, v)
		}
	}
	return out
}

func (inv *inventory) one(ctx context.Context, name string) (QueueView, bool) {
	ctx, cancel := context.WithTimeout(ctx, inv.timeout)
	defer cancel()
	v, err := inv.core.QueueStatus(ctx, name)
	if err != nil {
		if !errors.Is(err, gateway.ErrNotFound) { // deleted meanwhile: no news
			inv.log.Debug("queue statistics", "queue", name, "err", err)
		}
		return QueueView{}, false
	}
	return v, true
}
