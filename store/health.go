package store

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// failureHold is how long a store failure the store met keeps the gateway
// unready (Failure) unless a store succeeds first: long enough to be seen
// by a load balancer's probes, short enough that a gateway which gets no
// traffic while unready does not stay so.
const failureHold = 10 * time.Second

// health records the outcome of the stores.
type health struct {
	// check is Config.Health.
	check func() error

	failures atomic.Uint64

	mu   sync.Mutex
	last error
	at   time.Time

	// probeMu guards probeKV, the health bucket once Probe opened it.
	probeMu sync.Mutex
	probeKV *KV
}

// precheck fails a store at once while the NATS server reports a store
// failure (a full disk): nothing is attempted, so the caller may retry later.
func (h *health) precheck(op string) error {
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
func (h *health) note(err error) {
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

// Failure is the last storage failure a store met (a full disk, a
// JetStream limit), or the NATS server's standing one (Config.Health); nil
// once a store succeeded since, or some seconds after the last failure.
func (s *Store) Failure() error {
	h := &s.health
	if h.check != nil {
		if err := h.check(); err != nil {
			return err
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last != nil && time.Since(h.at) < failureHold {
		return h.last
	}
	return nil
}

// Failures counts stores that failed for want of storage.
func (s *Store) Failures() uint64 { return s.health.failures.Load() }

// Probe checks that JetStream answers and stores: it writes key in the
// small KV bucket mapping.HealthBucket (created on first use, with the
// queues' replicas; keys expire after an hour) and reads it back.
func (s *Store) Probe(ctx context.Context, key string) error {
	h := &s.health
	h.probeMu.Lock()
	defer h.probeMu.Unlock()
	if h.probeKV == nil {
		kv, err := s.OpenKV(ctx, KVConfig{
			Bucket:      mapping.HealthBucket,
			Description: "lmq-gateway readiness probes (one key per gateway)",
			TTL:         time.Hour,
			Replicas:    s.cfg.Replicas,
			Create:      KVCreateOrUpdate,
		})
		if err != nil {
			return fmt.Errorf("jetstream: health %w", err)
		}
		h.probeKV = kv
	}
	val := strconv.FormatInt(time.Now().UnixNano(), 10)
	if _, err := h.probeKV.Put(ctx, key, []byte(val)); err != nil {
		return fmt.Errorf("jetstream: write: %w", err)
	}
	e, err := h.probeKV.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("jetstream: read: %w", err)
	}
	if string(e.Value) != val {
		// Another writer of the same key, or a stale read: still reachable.
		s.log.Debug("readiness probe read another value", "key", key)
	}
	return nil
}
