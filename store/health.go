package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
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
	// log hears when stores start failing for want of storage, and when
	// they succeed again.
	log *slog.Logger

	failures atomic.Uint64

	mu   sync.Mutex
	last error
	at   time.Time

	// probeMu guards probeKV, the health bucket once Probe opened it.
	probeMu sync.Mutex
	probeKV *kv.KV
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
// storage failure (a full disk, a JetStream limit) becomes it. The first
// failure after a success is logged as a warning, the first success after
// failures at info: once each way, however many stores meanwhile.
func (h *health) note(err error) {
	if err == nil {
		h.mu.Lock()
		was := h.last
		h.last = nil
		h.mu.Unlock()
		if was != nil && h.log != nil {
			h.log.Info("JetStream takes writes again")
		}
		return
	}
	if !isStorageErr(err) {
		return
	}
	h.failures.Add(1)
	h.mu.Lock()
	was := h.last
	h.last, h.at = err, time.Now()
	h.mu.Unlock()
	if was == nil && h.log != nil {
		h.log.Warn("STORE FULL: JetStream refuses writes for want of storage; pushes are answered 503 until space is freed: delete or purge queues, "+
			"or let consumers drain them (pulls, acks, deletions and purges are served; /readyz stays 200, /readyz?verbose and lmq_store_failing say so). "+
			"With the embedded server, --max-store sets the limit", "err", err)
	}
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
//
// A store that refuses writes for want of storage (Failure: JetStream's
// limit reached, the disk full) still serves what drains it: pulls, acks,
// deletions and purges. Then only the read is tried (the write would be
// refused, and on a full disk might not be answered at all), and a write
// refused for want of storage is recorded (Failure) rather than answered:
// the probe fails only when JetStream does not answer.
func (s *Store) Probe(ctx context.Context, key string) error {
	h := &s.health
	h.probeMu.Lock()
	defer h.probeMu.Unlock()
	if h.probeKV == nil {
		kv, err := s.OpenKV(ctx, kv.Config{
			Bucket:      mapping.HealthBucket,
			Description: "lmq-gateway readiness probes (one key per gateway)",
			TTL:         time.Hour,
			Replicas:    s.cfg.Replicas,
			Create:      kv.CreateOrUpdate,
		})
		if err != nil {
			if isStorageErr(err) {
				h.note(err)
				return s.probeAnswers(ctx)
			}
			return fmt.Errorf("jetstream: health %w", err)
		}
		h.probeKV = kv
	}
	val := strconv.FormatInt(time.Now().UnixNano(), 10)
	if s.Failure() == nil {
		_, err := h.probeKV.Put(ctx, key, []byte(val))
		switch {
		case err == nil:
			h.note(nil)
		case isStorageErr(err):
			h.note(err)
		default:
			return fmt.Errorf("jetstream: write: %w", err)
		}
	}
	e, err := h.probeKV.Get(ctx, key)
	if errors.Is(err, kv.ErrKeyNotFound) {
		return nil // answered: the key was not written (the store is full) or expired
	}
	if err != nil {
		return fmt.Errorf("jetstream: read: %w", err)
	}
	if string(e.Value) != val {
		// Another writer of the same key, a write refused, or a stale read:
		// still reachable.
		s.log.Debug("readiness probe read another value", "key", key)
	}
	return nil
}

// probeAnswers checks that JetStream answers at all (its account
// information), for a probe that cannot use the health bucket.
func (s *Store) probeAnswers(ctx context.Context) error {
	if _, err := s.js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("jetstream: account info: %w", err)
	}
	return nil
}
