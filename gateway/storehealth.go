package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// storeFailureHold is how long a store failure the gateway met keeps it
// unready (StoreFailure) unless a store succeeds first: long enough to be
// seen by a load balancer's probes, short enough that a gateway which gets no
// traffic while unready does not stay so.
const storeFailureHold = 10 * time.Second

// storeHealth records the outcome of this gateway's stores.
type storeHealth struct {
	// check is Config.StoreHealth.
	check func() error

	failures atomic.Uint64

	mu   sync.Mutex
	last error
	at   time.Time

	// probeMu guards probeKV, the health bucket once ProbeStore opened it.
	probeMu sync.Mutex
	probeKV jetstream.KeyValue
}

// precheck fails a store at once while the NATS server reports a store
// failure (a full disk): nothing is attempted, so the caller may retry later.
func (h *storeHealth) precheck(op string) error {
	if h.check == nil {
		return nil
	}
	if err := h.check(); err != nil {
		err = fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
		h.note(err)
		return err
	}
	return nil
}

// note records a store's outcome: a success clears the standing failure, a
// storage failure (a full disk, a JetStream limit) becomes it.
func (h *storeHealth) note(err error) {
	if err == nil {
		h.mu.Lock()
		h.last = nil
		h.mu.Unlock()
		return
	}
	if !isStorageErr(err) {
		return
	}
	h.failures.Add(1)
	h.mu.Lock()
	h.last, h.at = err, time.Now()
	h.mu.Unlock()
}

// isStorageErr tells failures of the store itself (disk full, limits) from
// others (timeouts, bad input). Their retries may succeed once space is
// freed.
func isStorageErr(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jsErrInsufficientResources, jsErrMemoryResources, jsErrStorageResources:
			return true
		}
	}
	s := err.Error()
	return strings.Contains(s, "no space left") || strings.Contains(s, "insufficient resources") ||
		strings.Contains(s, "jetstream store failed")
}

// StoreFailure is the last storage failure a store of this gateway met (a
// full disk, a JetStream limit), or the NATS server's standing one
// (Config.StoreHealth); nil once a store succeeded since, or some seconds
// after the last failure. Readiness reports it.
func (g *Gateway) StoreFailure() error {
	if g.store.check != nil {
		if err := g.store.check(); err != nil {
			return err
		}
	}
	g.store.mu.Lock()
	defer g.store.mu.Unlock()
	if g.store.last != nil && time.Since(g.store.at) < storeFailureHold {
		return g.store.last
	}
	return nil
}

// StoreFailures counts stores that failed for want of storage.
func (g *Gateway) StoreFailures() uint64 { return g.store.failures.Load() }

// ProbeStore checks that JetStream answers and stores: it writes this
// gateway's key in the small KV bucket mapping.HealthBucket (created on first
// use, with the queues' replicas; keys expire after an hour) and reads it
// back. Readiness calls it.
func (g *Gateway) ProbeStore(ctx context.Context) error {
	g.store.probeMu.Lock()
	defer g.store.probeMu.Unlock()
	if g.store.probeKV == nil {
		kv, err := g.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      mapping.HealthBucket,
			Description: "lmq-gateway readiness probes (one key per gateway)",
			History:     1,
			TTL:         time.Hour,
			Replicas:    g.cfg.Replicas,
		})
		if err != nil {
			return fmt.Errorf("jetstream: health bucket: %w", err)
		}
		g.store.probeKV = kv
	}
	key := "gw." + g.id
	val := strconv.FormatInt(time.Now().UnixNano(), 10)
	if _, err := g.store.probeKV.Put(ctx, key, []byte(val)); err != nil {
		return fmt.Errorf("jetstream: write: %w", err)
	}
	e, err := g.store.probeKV.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("jetstream: read: %w", err)
	}
	if string(e.Value()) != val {
		// Another writer of the same key, or a stale read: still reachable.
		g.log.Debug("readiness probe read another value", "key", key)
	}
	return nil
}
