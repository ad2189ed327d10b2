package accumulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

const (
	// opTimeout bounds one JetStream request.
	opTimeout = 10 * time.Second
	// pushTimeout bounds a whole push: a part must be settled (taken by its
	// window, or removed) long before strayAge makes it look stray.
	pushTimeout = 30 * time.Second
	// maxAttempts bounds how often a push retries because the window it
	// joined closed before its part was stored, or another push opened one
	// at the same time; more than a few means trouble.
	maxAttempts = 20
	// defaultLease is how long a close job stays with its runner without a
	// write before another gateway may take it over.
	defaultLease = 30 * time.Second
	// defaultGrace delays the close of a window by gateways other than the
	// one that opened it, which normally closes it on time.
	defaultGrace = 500 * time.Millisecond
)

// Config configures an Accumulator.
type Config struct {
	// Replicas of the mapping.AccumBucket bucket; use the queues' replicas
	// (1 on a single node).
	Replicas int
	// Domain and APIPrefix select the JetStream to use, as the core's
	// (gateway.Config); at most one of them.
	Domain    string
	APIPrefix string
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
}

// Accumulator implements gateway.Accumulator on JetStream. Create it with New
// after the core, Start it, install it with Gateway.SetAccumulator, and Stop
// it before the core.
type Accumulator struct {
	cfg  Config
	core *gateway.Gateway
	bus  *bus.Bus
	kv   *kv.KV
	log  *slog.Logger
	id   string

	lease time.Duration
	grace time.Duration

	// cache mirrors the window pointers (by encoded queue name) from the
	// scheduler's watch, so that a push usually needs no read before it
	// stores its part; a stale entry costs a retry, never a wrong answer. A
	// removed pointer stays as its marker's revision, which the next window
	// of the queue is written over (one small entry per queue).
	mu    sync.RWMutex
	cache map[string]cached

	sched   *scheduler
	sub     *bus.Subscription
	cancel  context.CancelFunc
	closing chan struct{}
	once    sync.Once
	wg      sync.WaitGroup

	// TestSignals report the scheduler's events to tests (signals.go);
	// set nothing here outside tests.
	TestSignals Signals
}

// cached is a pointer as last seen: w is nil when the key is removed.
type cached struct {
	w   *window
	rev uint64
}

// New returns the accumulator of core on bus's JetStream; nothing happens
// until Start. Parts and compound messages go through core, which owns the
// queue streams; the bucket mapping.AccumBucket is the accumulator's own.
func New(bus *bus.Bus, core *gateway.Gateway, cfg Config) *Accumulator {
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Accumulator{
		cfg:     cfg,
		core:    core,
		bus:     bus,
		log:     cfg.Logger.With("component", "accumulator"),
		id:      core.ID(),
		lease:   defaultLease,
		grace:   defaultGrace,
		cache:   make(map[string]cached),
		closing: make(chan struct{}),
	}
}

// Start creates the bucket if needed, loads the open windows and close
// jobs, and starts the scheduler that closes windows on time
// (lifecycle.Service). ctx bounds the start. On failure nothing is left
// running, and Start may be tried again.
func (a *Accumulator) Start(ctx context.Context) error {
	bkt, err := a.bus.OpenKV(ctx, a.cfg.Domain, a.cfg.APIPrefix, kv.Config{
		Bucket:      mapping.AccumBucket,
		Description: "lmq-gateway accumulation: open windows and close jobs",
		Replicas:    a.cfg.Replicas,
		// Needed for the TTL of the markers left by removed keys: every
		// window leaves one, and they would otherwise pile up.
		MarkerTTL: markerTTL,
		Create:    kv.CreateOrUpdate,
	})
	if err != nil {
		return fmt.Errorf("accumulation bucket: %w", err)
	}
	a.kv = bkt
	// Other gateways ask here whether this one is alive before they take
	// over its close jobs; a dead one has no subscriber, and NATS answers
	// "no responders" at once.
	sub, err := a.bus.Subscribe(aliveSubject(a.id), func(m bus.Msg) { _ = m.Respond(nil) })
	if err != nil {
		return fmt.Errorf("subscribe liveness: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	sched, err := newScheduler(ctx, runCtx, a)
	if err != nil {
		cancel()
		_ = sub.Unsubscribe()
		return err
	}
	a.sub, a.cancel, a.sched = sub, cancel, sched
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.sched.loop(runCtx)
	}()
	return nil
}

// Stop stops the scheduler and the closes under way (a close job left
// unfinished is resumed by another gateway, or by this one after a restart)
// and waits for them (lifecycle.Service). Pushes fail from then on.
func (a *Accumulator) Stop() {
	a.once.Do(func() {
		close(a.closing)
		if a.sub == nil {
			return // not started
		}
		_ = a.sub.Unsubscribe()
		a.cancel()
		a.wg.Wait()
	})
}

func aliveSubject(id string) string { return "lmq.gw." + id + ".accum" }

// alive reports whether the gateway with that id still runs. Only a "no
// responders" answer counts as dead: a slow answer is not proof of death.
func (a *Accumulator) alive(ctx context.Context, id string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := a.bus.Request(ctx, aliveSubject(id), nil)
	return !errors.Is(err, bus.ErrNoResponders)
}

func (a *Accumulator) cachedPtr(enc string) cached {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.cache[enc]
}

// setCache records a pointer state unless a newer one is known (the watch
// may deliver an old state after a push recorded the window it opened).
func (a *Accumulator) setCache(enc string, w *window, rev uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cur, ok := a.cache[enc]; ok && cur.rev > rev {
		return
	}
	if w == nil && rev == 0 {
		delete(a.cache, enc)
		return
	}
	a.cache[enc] = cached{w: w, rev: rev}
}

// unavailable classifies an error for the front ends: unavailable unless the
// core said more already (ErrUnknown: a store may have happened, which is
// never wrapped together with ErrUnavailable).
func unavailable(op string, err error) error {
	if errors.Is(err, gateway.ErrUnavailable) || errors.Is(err, gateway.ErrUnknown) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, gateway.ErrUnavailable, err)
}

// Push stores msg as a part of queue's open window, opening a window of
// accum (with retry) when there is none. It answers once the part is in
// JetStream and is known to belong to the window it reports.
func (a *Accumulator) Push(ctx context.Context, queue string, accum time.Duration, retry int, msg gateway.Message) (gateway.AccumState, error) {
	select {
	case <-a.closing:
		return "", fmt.Errorf("accumulate: %w: accumulator stopped", gateway.ErrUnavailable)
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, pushTimeout)
	defer cancel()
	part, err := a.core.Parts().EncodePart(ctx, queue, msg, retry)
	if err != nil {
		return "", err
	}
	st, settled, err := a.push(ctx, queue, accum, retry, part)
	if err != nil && settled {
		// No window holds the part: its large body, if any, is garbage.
		a.core.Parts().DropBody(ctx, part)
	}
	return st, err
}

// push is Push after encoding. settled is false when the part may have been
// taken by a window although the push failed (its body must then stay).
func (a *Accumulator) push(ctx context.Context, queue string, accum time.Duration, retry int, part *gateway.Entry) (st gateway.AccumState, settled bool, err error) {
	enc := mapping.EncodeName(queue)
	fresh := false
	lost := 0
	for range maxAttempts {
		cur := a.cachedPtr(enc)
		if fresh {
			e, err := a.read(ctx, ptrKey(enc))
			if err != nil {
				return "", true, unavailable("accumulate", err)
			}
			cur = cached{rev: e.rev}
			if e.live {
				var w window
				if err := json.Unmarshal(e.value, &w); err != nil {
					return "", true, fmt.Errorf("accumulate: window of %q: %w", queue, err)
				}
				cur.w = &w
			}
		}
		var w window
		var rev uint64
		if cur.w != nil {
			w, rev, st = *cur.w, cur.rev, gateway.AccumYes
		} else {
			now := time.Now()
			w = window{
				ID:       uuid.NewString(),
				Queue:    queue,
				Opened:   now.UnixNano(),
				Deadline: now.Add(accum).UnixNano(),
				Retry:    retry,
				Opener:   a.id,
			}
			var won bool
			rev, won, err = a.open(ctx, enc, &w, cur.rev)
			if err != nil {
				return "", true, unavailable("accumulate", err)
			}
			if !won {
				// Another push opened one first: join it. In a cluster the
				// write may also have been refused because another one on
				// the key was still being replicated; then wait a moment.
				fresh = true
				if lost++; lost > 1 {
					if err := pause(ctx, lost); err != nil {
						return "", true, unavailable("accumulate", err)
					}
				}
				continue
			}
			st = gateway.AccumNew
		}
		if err := a.core.Parts().StorePart(ctx, part, w.ID); err != nil {
			// Unless the outcome is unknown, nothing was stored.
			return "", !errors.Is(err, gateway.ErrUnknown), unavailable("store part", err)
		}
		in, err := a.confirm(ctx, enc, &w, rev, part.Seq)
		if err != nil {
			return "", false, unavailable("accumulate", err)
		}
		if in {
			return st, true, nil
		}
		fresh = true
	}
	return "", true, fmt.Errorf("accumulate: %w: windows of %q kept closing under the push", gateway.ErrUnavailable, queue)
}

// open writes a new window pointer. markerRev is the revision of the marker
// the last window left (0: none). won is false when another push opened a
// window first, or markerRev was out of date.
func (a *Accumulator) open(ctx context.Context, enc string, w *window, markerRev uint64) (rev uint64, won bool, err error) {
	b, err := json.Marshal(w)
	if err != nil {
		return 0, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	// Not KV.Create: over the marker of the previous window it reads
	// the marker's revision from any replica, which may be behind. The
	// revision here comes from the watch or a leader read; a wrong one only
	// fails, and the push reads again.
	rev, err = a.kv.Update(ctx, ptrKey(enc), b, markerRev)
	if errors.Is(err, kv.ErrRevisionMismatch) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("open window: %w", err)
	}
	a.setCache(enc, w, rev)
	return rev, true, nil
}

// confirm decides whether the part stored at seq, tagged with window w read
// at pointer revision rev, belongs to w. If not, it removes the part and the
// push must try again.
//
// If the pointer is still at rev, the window's close has not begun: its cut
// will be read after the pointer is removed, so after this part was stored,
// and will include it. Otherwise the close job exists (its runner creates it
// before it removes the pointer) or has finished, and its cut decides.
func (a *Accumulator) confirm(ctx context.Context, enc string, w *window, rev, seq uint64) (bool, error) {
	cur, err := a.read(ctx, ptrKey(enc))
	if err != nil {
		return false, err
	}
	if cur.live && cur.rev == rev {
		return true, nil
	}
	a.log.Debug("window closing under a push", "queue", w.Queue, "window", w.ID, "seq", seq)
	key := jobKey(enc, w.ID)
	for attempt := 1; ; attempt++ {
		j, jrev, ok, err := a.readJob(ctx, key)
		if err != nil {
			return false, err
		}
		if !ok {
			// Finished: its runner removed every part it took before it
			// removed the job, so a part still stored was not taken.
			found, err := a.partStored(ctx, w.Queue, seq)
			if err != nil {
				return false, err
			}
			if !found {
				return true, nil
			}
			break
		}
		if j.Cut == nil {
			// The runner has not fixed the cut yet: fix it here, after
			// this part was stored, so that it is in.
			last, err := a.lastSeq(ctx, w.Queue)
			if err != nil {
				return false, err
			}
			j.Cut = &last
			b, err := json.Marshal(j)
			if err != nil {
				return false, err
			}
			uctx, cancel := context.WithTimeout(ctx, opTimeout)
			_, err = a.kv.Update(uctx, key, b, jrev)
			cancel()
			if errors.Is(err, kv.ErrRevisionMismatch) {
				if err := pause(ctx, attempt); err != nil {
					return false, err
				}
				continue
			}
			if err != nil {
				return false, fmt.Errorf("fix cut: %w", err)
			}
			a.log.Debug("push fixed the cut of a closing window", "queue", w.Queue, "window", w.ID, "cut", last)
		}
		if seq <= *j.Cut {
			return true, nil
		}
		break
	}
	// Too late for w: no window will take this part; remove it (should that
	// fail, the stray part is collected by a later close).
	a.log.Debug("part missed its window; pushing it again", "queue", w.Queue, "window", w.ID, "seq", seq)
	if err := a.deletePart(ctx, w.Queue, seq); err != nil {
		a.log.Warn("could not remove a part that missed its window", "queue", w.Queue, "seq", seq, "err", err)
	}
	return false, nil
}

// pause waits a little longer at each attempt (with jitter), for writes that
// lost a race on a key; ctx ending cuts it short.
func pause(ctx context.Context, attempt int) error {
	d := time.Duration(min(attempt, 20)) * 2 * time.Millisecond
	d += rand.N(d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// lastSeq is the last sequence of the queue's stream, from its leader.
func (a *Accumulator) lastSeq(ctx context.Context, queue string) (uint64, error) {
	log, err := a.core.Logs().QueueLog(ctx, queue)
	if errors.Is(err, gateway.ErrNotFound) {
		// Deleted under a push: the push cannot be placed, try again.
		return 0, fmt.Errorf("queue %q was deleted: %w", queue, gateway.ErrUnavailable)
	}
	if err != nil {
		return 0, err
	}
	return log.LastSeq(), nil
}

func (a *Accumulator) partStored(ctx context.Context, queue string, seq uint64) (bool, error) {
	log, err := a.core.Logs().QueueLog(ctx, queue)
	if errors.Is(err, gateway.ErrNotFound) {
		return false, nil // the queue was deleted, and its parts with it
	}
	if err != nil {
		return false, err
	}
	found, err := log.Has(ctx, seq)
	if err != nil {
		return false, fmt.Errorf("look up part: %w", err)
	}
	return found, nil
}

func (a *Accumulator) deletePart(ctx context.Context, queue string, seq uint64) error {
	log, err := a.core.Logs().QueueLog(ctx, queue)
	if errors.Is(err, gateway.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return log.Delete(ctx, seq)
}
