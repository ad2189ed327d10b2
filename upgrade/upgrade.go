// Package upgrade moves queues of the one-stream-per-queue layout into the
// shards, once: package server runs it (Run) after the core has started and
// before anything is served, and it returns at once when no old stream
// exists.
//
// Versions up to commit 61f8f84 kept every queue in its own WorkQueue stream
// "LMQ_<enc>" (mapping.LegacyStreamName) with a durable consumer "lmq". For
// every such queue the upgrade registers the queue, moves its own
// properties when their key changes (hashed long names), copies every
// message of the old stream in stream order to the queue's subjects in its
// shard stream, fixes up the accumulator's close jobs, and deletes the old
// stream. Deliverable messages, parts of open accumulation windows,
// delayed messages (their schedules) and dead letters keep their bodies and
// every header but JetStream's own Nats-* ones; a delayed message keeps
// its Nats-Schedule, with Nats-Schedule-Target pointing to the new queue
// subject; a message with a ttl gets its Nats-TTL from Lmq-Expires again (one
// already expired is dropped, as a delivery would). A message the old
// gateway had handed out and not settled (a gateway that was killed)
// counts that delivery in Lmq-Delivered, as JetStream's redelivery would
// have.
//
// Interruptions: messages are moved in batches of batchSize, in order; the
// copies of a batch are stored (and acknowledged by JetStream) before the
// originals are removed, with one purge up to the batch's last sequence.
// Each copy carries Nats-Msg-Id "lmq-upgrade.<old stream>.<its creation
// time>.<seq>", and a run that starts on a queue first reads the queue's
// messages already in the shard and skips the originals whose copy is there
// (move.go, copied). So a kill -9 at any point loses nothing, the next start
// finishes the upgrade, and nothing is stored twice, however long after the
// crash that start comes (JetStream's duplicate window plays no part). A
// delayed message's copy needs no id: its schedule subject is its own, and
// storing it again replaces it. Old streams are deleted only once empty,
// properties keys only after the copy.
//
// Several gateways: one upgrades at a time, holding the lock key lockKey in
// the properties bucket (lock.go); the others wait in their start-up and
// re-list what is left once they get the lock. Gateways of the old version
// must not run meanwhile: they would re-create old streams on their next
// push.
//
// The upgrade writes the shard streams itself (not through the core's store
// path): no client is served while it runs, and its copies need what a push
// does not (ids that name the original, schedules stored as they are).
package upgrade

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

const (
	// batchSize is how many messages are copied at a time.
	batchSize = 256
	// workers is how many queues move at once.
	workers = 8
	// progressEvery spaces the progress lines of a long upgrade.
	progressEvery = 5 * time.Second
	// opTimeout bounds one JetStream request (or a few that belong together).
	opTimeout = 10 * time.Second
	// storeTimeout bounds the wait for JetStream's acknowledgements of one
	// batch of copies.
	storeTimeout = 5 * time.Second
	// PauseEnv names the test hook of the e2e tests: when set to N, the
	// upgrade stops once it has stored the copy of its Nth message (its
	// original not yet removed) and waits there until it is cancelled (the
	// gateway is killed), so that a test can interrupt it at a known point.
	PauseEnv = "LMQ_TEST_UPGRADE_PAUSE_AFTER"
)

// Core is what the upgrade needs of the queue core: the gateway itself and
// its Logs handle (*gateway.Gateway and gateway.Logs; package server holds
// the compile-time checks, so that the upgrade needs no import of the
// core).
type Core struct {
	Gateway Gateway
	Logs    Logs
}

// Gateway is what the upgrade needs of the gateway itself
// (*gateway.Gateway).
type Gateway interface {
	// ID identifies the gateway: the holder of the upgrade lock.
	ID() string
	// Closing is closed when the core shuts down: the upgrade stops.
	Closing() <-chan struct{}
}

// Logs is what the upgrade moves queues with (gateway.Logs).
type Logs interface {
	// RegisterQueue makes the queue exist in the registry.
	RegisterQueue(ctx context.Context, queue string) error
	// MakeShard makes sure the queue's shard stream exists (the upgrade
	// then opens it with its own JetStream handle).
	MakeShard(ctx context.Context, queue string) error
}

// Deps is what Run works with.
type Deps struct {
	// NATS is the core's connection.
	NATS *bus.Bus
	// Core is the started core the queues are moved into.
	Core Core
	// Domain and APIPrefix select the JetStream, as the core's
	// gateway.Config does (at most one of them).
	Domain, APIPrefix string
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
}

// Run moves every queue of the one-stream-per-queue layout into the shards
// (see the package doc). It returns at once when there is none (it lists
// the streams, nothing more), and waits while another gateway upgrades.
//
// An upgrade can take longer than one start attempt: it ignores ctx's
// deadline, but stops when ctx is cancelled before that deadline or the
// core is closed (each JetStream request has its own timeout). A stopped
// upgrade resumes at the next start.
func Run(parent context.Context, d Deps) error {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	ctx, cancel := detach(parent, d.Core.Gateway.Closing())
	defer cancel()
	js, err := jsapi.New(d.NATS.NATS(), d.Domain, d.APIPrefix)
	if err != nil {
		return err
	}
	u := &upgrader{nc: d.NATS.NATS(), js: js, core: d.Core, log: d.Logger}
	streams, err := u.legacyStreams(ctx)
	if err != nil || len(streams) == 0 {
		return err
	}
	// The core made the bucket at its start.
	kctx, kcancel := context.WithTimeout(ctx, opTimeout)
	u.kv, err = kv.Open(kctx, js, kv.Config{Bucket: mapping.PropsBucket, Create: kv.Existing})
	kcancel()
	if err != nil {
		return fmt.Errorf("properties bucket: %w", err)
	}
	ctx, unlock, err := u.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	// Another gateway may have done (part of) it while this one waited.
	if streams, err = u.legacyStreams(ctx); err != nil || len(streams) == 0 {
		return err
	}
	return u.run(ctx, streams)
}

// detach returns a context that ends when parent is cancelled, but not when
// its deadline passes, or when closing is closed. cancel ends it and its
// goroutine.
func detach(parent context.Context, closing <-chan struct{}) (ctx context.Context, cancel context.CancelFunc) {
	ctx, end := context.WithCancel(context.WithoutCancel(parent))
	stop := context.AfterFunc(parent, func() {
		if !errors.Is(parent.Err(), context.DeadlineExceeded) {
			end()
		}
	})
	go func() {
		select {
		case <-closing:
			end()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		stop()
		end()
	}
}

// upgrader is one run of the upgrade.
type upgrader struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	kv   *kv.KV // mapping.PropsBucket: properties and the lock
	core Core
	log  *slog.Logger
}

// stats counts what an upgrade did.
type stats struct {
	queues  atomic.Int64
	moved   atomic.Int64
	expired atomic.Int64
	logged  atomic.Int64 // Unix ns of the last progress line
}

// progress logs a progress line when the last one is old enough.
func (s *stats) progress(log *slog.Logger, queue string) {
	last := s.logged.Load()
	now := time.Now().UnixNano()
	if now-last < int64(progressEvery) || !s.logged.CompareAndSwap(last, now) {
		return
	}
	log.Info("upgrade in progress", "queues_done", s.queues.Load(), "messages", s.moved.Load(), "queue", queue)
}

// run moves the old streams' queues, holding the lock.
func (u *upgrader) run(ctx context.Context, streams []string) error {
	u.log.Info("upgrading queues from the one-stream-per-queue layout", "queues", len(streams))
	pauseAfter := -1
	if v := os.Getenv(PauseEnv); v != "" {
		var err error
		if pauseAfter, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("%s: %w", PauseEnv, err)
		}
	}
	start := time.Now()
	var st stats
	st.logged.Store(start.UnixNano())
	jobs, err := u.readCloseJobs(ctx)
	if err != nil {
		return err
	}
	// Queues are independent: several move at once (their requests wait
	// on round trips, not on this process).
	wctx, stopWork := context.WithCancelCause(ctx)
	defer stopWork(nil)
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(workers, len(streams)) {
		wg.Go(func() {
			for stream := range work {
				if err := u.stream(wctx, stream, &st, pauseAfter, jobs); err != nil {
					stopWork(fmt.Errorf("upgrade %s: %w", stream, err))
					return
				}
			}
		})
	}
feed:
	for _, stream := range streams {
		select {
		case work <- stream:
		case <-wctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if wctx.Err() != nil {
		return context.Cause(wctx)
	}
	secs := time.Since(start).Seconds()
	u.log.Info("upgrade from the one-stream-per-queue layout done",
		"queues", st.queues.Load(), "messages", st.moved.Load(), "expired", st.expired.Load(),
		"seconds", fmt.Sprintf("%.3f", secs))
	return nil
}

// legacyStreams lists the streams of the old layout. Buckets, the shards
// (LMQS_*) and the migration journal do not start with
// mapping.LegacyStreamPrefix.
func (u *upgrader) legacyStreams(ctx context.Context) ([]string, error) {
	names := u.js.StreamNames(ctx)
	var out []string
	for s := range names.Name() {
		if _, ok := mapping.LegacyQueueFromStream(s); ok {
			out = append(out, s)
		}
	}
	if err := names.Err(); err != nil {
		return nil, fmt.Errorf("list streams: %w", err)
	}
	slices.Sort(out)
	return out, nil
}

// legacyQueueName resolves the queue of an old stream: its decoded name or,
// for hashed names, the name in its metadata. ok is false for a stream
// that is not a queue stream of the old layout (someone else's "LMQ_…").
func legacyQueueName(stream string, cfg jetstream.StreamConfig) (string, bool) {
	tok, ok := mapping.LegacyQueueFromStream(stream)
	if !ok {
		return "", false
	}
	name, ok := mapping.DecodeName(tok)
	if !ok {
		name = cfg.Metadata[mapping.MetaQueueName]
	}
	if mapping.ValidateQueueName(name) != nil || mapping.LegacyStreamName(name) != stream ||
		!slices.Contains(cfg.Subjects, mapping.LegacyQueueSubject(name)) {
		return "", false
	}
	return name, true
}

// stream moves one old stream's queue into its shard.
func (u *upgrader) stream(ctx context.Context, stream string, st *stats, pauseAfter int, jobs *closeJobs) error {
	// The set-up requests share one timeout; the moves have their own.
	sctx, scancel := context.WithTimeout(ctx, opTimeout)
	defer scancel()
	old, err := u.js.Stream(sctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	queue, ok := legacyQueueName(stream, old.CachedInfo().Config)
	if !ok {
		u.log.Warn("stream named like an old-layout queue but not one; left alone", "stream", stream)
		return nil
	}
	if err := u.core.Logs.RegisterQueue(sctx, queue); err != nil {
		return err
	}
	if err := u.core.Logs.MakeShard(sctx, queue); err != nil {
		return err
	}
	shard, err := u.js.Stream(sctx, mapping.StreamName(queue))
	if err != nil {
		return fmt.Errorf("open shard: %w", err)
	}
	if err := u.props(sctx, queue); err != nil {
		return err
	}
	// Messages the old gateway handed out and never settled: those on the
	// queue subject up to the consumer's last delivered sequence.
	var delivered uint64
	if c, err := old.Consumer(sctx, mapping.LegacyConsumerName); err == nil {
		delivered = c.CachedInfo().Delivered.Stream
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("old consumer: %w", err)
	}
	mv := move{u: u, queue: queue, stream: stream, old: old, shard: shard, delivered: delivered,
		created: old.CachedInfo().Created}
	moved, expired, unknown, err := mv.run(ctx, st, pauseAfter)
	if err != nil {
		return err
	}
	jctx, jcancel := context.WithTimeout(ctx, opTimeout)
	defer jcancel()
	if err := jobs.fix(jctx, u.log, queue, shard); err != nil {
		return err
	}
	if unknown > 0 {
		u.log.Warn("old-layout stream keeps messages on subjects the upgrade does not know; not deleted",
			"stream", stream, "queue", queue, "messages", unknown)
	} else if err := u.js.DeleteStream(jctx, stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("delete old stream: %w", err)
	}
	st.queues.Add(1)
	u.log.Info("upgraded queue", "queue", queue, "from", stream, "to", mapping.StreamName(queue),
		"messages", moved, "expired", expired)
	return nil
}

// props moves the queue's own properties to their new key, where it
// differs (hashed names): copy first, then remove the old key.
func (u *upgrader) props(ctx context.Context, queue string) error {
	oldKey, newKey := mapping.LegacyPropsKey(queue), mapping.PropsKey(queue)
	if oldKey == newKey {
		return nil
	}
	e, err := u.kv.Get(ctx, oldKey)
	if errors.Is(err, kv.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read old properties: %w", err)
	}
	if _, err := u.kv.Put(ctx, newKey, e.Value); err != nil {
		return fmt.Errorf("write properties: %w", err)
	}
	if err := u.kv.Delete(ctx, oldKey, kv.LastRevision(e.Revision)); err != nil {
		return fmt.Errorf("remove old properties: %w", err)
	}
	return nil
}
