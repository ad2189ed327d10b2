package ops

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// Core is what package ops needs of the core, one small interface per
// handle it reads (CoreOf makes it of a *gateway.Gateway).
type Core struct {
	Queues  Queues
	Inspect Inspect
	Gateway Gateway
}

// CoreOf is the Core of gateway g's handles.
func CoreOf(g *gateway.Gateway) Core {
	return Core{Queues: g.Queues(), Inspect: g.Inspect(), Gateway: g}
}

// Queues is what ops reads of the queues (gateway.Queues).
type Queues interface {
	QueueNames() []string
}

// Inspect is what ops reads of the queues' contents and the deliveries
// (gateway.Inspect).
type Inspect interface {
	// QueueStatuses is every queue's sizes and placement, sorted by name.
	QueueStatuses(ctx context.Context, scope gateway.Scope) ([]gateway.QueueStatus, error)
	InFlight() int
	// InFlightByQueue is InFlight per queue (queues with none absent).
	InFlightByQueue() map[string]int
	// WaitingPulls counts the pulls (HTTP, RPC and SQS) that may wait now.
	WaitingPulls() int
}

// Gateway is what ops reads of the gateway itself (*gateway.Gateway).
type Gateway interface {
	Closing() <-chan struct{}
	// ProbeStore checks that JetStream answers and stores (readiness).
	ProbeStore(ctx context.Context) error
	// StoreFailure is a standing failure to store (a full disk), nil when
	// there is none; StoreFailures counts stores that failed so.
	StoreFailure() error
	StoreFailures() uint64
	// Peers are the ids of the other gateways this one hears.
	Peers() []string
}

var (
	_ Queues  = (*gateway.Queues)(nil)
	_ Inspect = (*gateway.Inspect)(nil)
	_ Gateway = (*gateway.Gateway)(nil)
)

// QueueView is what JetStream knows about a queue, plus the servers holding it.
type QueueView = gateway.QueueStatus

// collectTimeout bounds one collection.
const collectTimeout = 30 * time.Second

// inventory asks JetStream about every queue, for /stats, /metrics and
// StatsD. A collection costs a few requests per shard stream, and is shared
// by everyone asking within ttl; it covers at most maxQueues queues.
type inventory struct {
	core      Core
	log       *slog.Logger
	ttl       time.Duration
	maxQueues int

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
		names := inv.core.Queues.QueueNames()
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
		views, err := inv.gather(gctx)
		cancel()
		inv.mu.Lock()
		if err == nil {
			inv.cached, inv.names, inv.at = views, names, time.Now()
		}
		inv.running = nil
		inv.mu.Unlock()
		close(done)
		return views, err
	}
}

// recent returns the last collection if it was made within maxAge, without
// waiting for one; ok is false when there is none that recent.
func (inv *inventory) recent(maxAge time.Duration) (views []QueueView, ok bool) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.cached == nil || time.Since(inv.at) > maxAge {
		return nil, false
	}
	return inv.cached, true
}

func (inv *inventory) gather(ctx context.Context) ([]QueueView, error) {
	all, err := inv.core.Inspect.QueueStatuses(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("queue statistics: %w", err)
	}
	// Queues JetStream could not answer about are left out.
	views := all[:0]
	for _, v := range all {
		if v.Err == nil {
			views = append(views, v)
		} else {
			inv.log.Debug("queue statistics", "queue", v.Name, "err", v.Err)
		}
	}
	if len(views) > inv.maxQueues {
		inv.log.Warn("more queues than statistics cover", "queues", len(views), "max", inv.maxQueues)
		views = views[:inv.maxQueues]
	}
	return views, nil
}
