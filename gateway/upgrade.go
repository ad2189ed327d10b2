package gateway

// Upgrade from the one-stream-per-queue layout.
//
// Versions up to commit 61f8f84 kept every queue in its own WorkQueue stream
// "LMQ_<enc>" (mapping.LegacyStreamName) with a durable consumer "lmq". On
// start, before it serves anything, a gateway moves every such queue into
// the shards (upgradeLegacy): it registers the queue, moves its own
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
// Interruptions: messages are moved in batches of upgradeBatch, in order;
// the copies of a batch are stored (and acknowledged by JetStream) before
// the originals are removed, with one purge up to the batch's last
// sequence. Each copy carries Nats-Msg-Id "lmq-upgrade.<old stream>.<its
// creation time>.<seq>", and a run that starts on a queue first reads the
// queue's messages already in the shard and skips the originals whose copy
// is there (copied). So a kill -9 at any point loses nothing, the next
// start finishes the upgrade, and nothing is stored twice, however long
// after the crash that start comes (JetStream's duplicate window plays no
// part). A delayed message's copy needs no id: its schedule subject is its
// own, and storing it again replaces it. Old streams are deleted only once
// empty, properties keys only after the copy.
//
// Several gateways: one upgrades at a time, holding the lock key
// upgradeLockKey in the properties bucket (written with revision checks,
// renewed every few seconds, with the holder's id); the others wait in
// their start-up and re-list what is left once they get the lock. A holder
// that died is noticed at once (nobody answers on its liveness subject) or
// when its lease runs out. Gateways of the old version must not run
// meanwhile: they would re-create old streams on their next push.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

const (
	// upgradeLockKey is the key in mapping.PropsBucket held by the gateway
	// that upgrades (the properties cache ignores keys it does not know).
	upgradeLockKey = "upgrade.lock"
	// upgradeLease is how long the lock stays with a holder that stopped
	// renewing it but still answers on its liveness subject.
	upgradeLease = 30 * time.Second
	// upgradePoll is how often a waiting gateway looks at the lock.
	upgradePoll = 500 * time.Millisecond
	// upgradeBatch is how many messages are copied at a time.
	upgradeBatch = 256
	// upgradeWorkers is how many queues move at once.
	upgradeWorkers = 8
	// upgradeProgressEvery spaces the progress lines of a long upgrade.
	upgradeProgressEvery = 5 * time.Second
	// upgradeMsgIDPrefix starts the Nats-Msg-Id of every moved message.
	upgradeMsgIDPrefix = "lmq-upgrade."
	// UpgradePauseEnv names the test hook of the e2e tests: when set to N,
	// the upgrade stops once it has stored the copy of its Nth message (its
	// original not yet removed) and waits there until the gateway is
	// killed, so that a test can interrupt it at a known point.
	UpgradePauseEnv = "LMQ_TEST_UPGRADE_PAUSE_AFTER"
)

// upgradeLockValue is the lock key's value.
type upgradeLockValue struct {
	Owner   string `json:"owner"`
	Expires int64  `json:"expires"` // Unix ns
}

// upgradeStats counts what an upgrade did.
type upgradeStats struct {
	queues  atomic.Int64
	moved   atomic.Int64
	expired atomic.Int64
	logged  atomic.Int64 // Unix ns of the last progress line
}

// progress logs a progress line when the last one is old enough.
func (s *upgradeStats) progress(log *slog.Logger, queue string) {
	last := s.logged.Load()
	now := time.Now().UnixNano()
	if now-last < int64(upgradeProgressEvery) || !s.logged.CompareAndSwap(last, now) {
		return
	}
	log.Info("upgrade in progress", "queues_done", s.queues.Load(), "messages", s.moved.Load(), "queue", queue)
}

// msgGone reports whether err says the message is not (or no longer) stored.
func msgGone(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrMsgNotFound) ||
		(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeMessageNotFound)
}

// upgradeLegacy moves every queue of the one-stream-per-queue layout into
// the shards (see the comment at the top of this file). It returns at once
// when there is none, and waits while another gateway upgrades.
//
// An upgrade can take longer than one start attempt: it ignores ctx's
// deadline, but stops when ctx is cancelled before that deadline or the
// gateway is closed (each JetStream request has its own timeout). A stopped
// upgrade resumes at the next start.
func (g *Gateway) upgradeLegacy(parent context.Context) error {
	ctx, cancel := context.WithCancel(g.work.ctx)
	defer cancel()
	stop := context.AfterFunc(parent, func() {
		if !errors.Is(parent.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	defer stop()
	streams, err := g.legacyStreams(ctx)
	if err != nil || len(streams) == 0 {
		return err
	}
	ctx, unlock, err := g.lockUpgrade(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	// Another gateway may have done (part of) it while this one waited.
	if streams, err = g.legacyStreams(ctx); err != nil || len(streams) == 0 {
		return err
	}
	g.log.Info("upgrading queues from the one-stream-per-queue layout", "queues", len(streams))
	pauseAfter := -1
	if v := os.Getenv(UpgradePauseEnv); v != "" {
		if pauseAfter, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("%s: %w", UpgradePauseEnv, err)
		}
	}
	start := time.Now()
	var stats upgradeStats
	stats.logged.Store(start.UnixNano())
	jobs, err := g.legacyJobs(ctx)
	if err != nil {
		return err
	}
	// Queues are independent: several move at once (their requests wait
	// on round trips, not on this process).
	wctx, stopWork := context.WithCancelCause(ctx)
	defer stopWork(nil)
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(upgradeWorkers, len(streams)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for stream := range work {
				if err := g.upgradeStream(wctx, stream, &stats, pauseAfter, jobs); err != nil {
					stopWork(fmt.Errorf("upgrade %s: %w", stream, err))
					return
				}
			}
		}()
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
	g.log.Info("upgrade from the one-stream-per-queue layout done",
		"queues", stats.queues.Load(), "messages", stats.moved.Load(), "expired", stats.expired.Load(),
		"seconds", fmt.Sprintf("%.3f", secs))
	return nil
}

// legacyStreams lists the streams of the old layout. Buckets (KV_*, OBJ_*),
// the shards (LMQS_*) and the migration journal do not start with
// mapping.LegacyStreamPrefix.
func (g *Gateway) legacyStreams(ctx context.Context) ([]string, error) {
	names := g.js.StreamNames(ctx)
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

func upgradeAliveSubject(id string) string { return "lmq.gw." + id + ".upgrade" }

// lockUpgrade takes the upgrade lock, waiting while a live gateway holds it.
// The returned context ends when the lock is lost (the upgrade must stop)
// or unlock is called; unlock releases the lock.
func (g *Gateway) lockUpgrade(ctx context.Context) (context.Context, func(), error) {
	sub, err := g.nc.Subscribe(upgradeAliveSubject(g.id), func(m *nats.Msg) { _ = m.Respond(nil) })
	if err != nil {
		return nil, nil, fmt.Errorf("subscribe upgrade liveness: %w", err)
	}
	mine := func() []byte {
		b, _ := json.Marshal(upgradeLockValue{Owner: g.id, Expires: time.Now().Add(upgradeLease).UnixNano()})
		return b
	}
	var rev uint64
	waiting := false
	for rev == 0 {
		e, err := g.kv.Get(ctx, upgradeLockKey)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			rev, err = g.kv.Create(ctx, upgradeLockKey, mine())
		case err == nil:
			var v upgradeLockValue
			if json.Unmarshal(e.Value(), &v) != nil || time.Now().UnixNano() > v.Expires || !g.upgradeHolderAlive(ctx, v.Owner) {
				rev, err = g.kv.Update(ctx, upgradeLockKey, mine(), e.Revision())
			} else if !waiting {
				waiting = true
				g.log.Info("waiting for another gateway to finish upgrading the queues", "gateway", v.Owner)
			}
		}
		if err != nil && !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			_ = sub.Unsubscribe()
			return nil, nil, fmt.Errorf("upgrade lock: %w", err)
		}
		if rev != 0 {
			break
		}
		t := time.NewTimer(upgradePoll)
		select {
		case <-ctx.Done():
			t.Stop()
			_ = sub.Unsubscribe()
			return nil, nil, ctx.Err()
		case <-t.C:
		}
	}
	lctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(upgradeLease / 6)
		defer tick.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-tick.C:
			}
			uctx, ucancel := context.WithTimeout(lctx, opTimeout)
			r, err := g.kv.Update(uctx, upgradeLockKey, mine(), rev)
			ucancel()
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyNotFound) {
				cancel(errors.New("upgrade lock lost to another gateway"))
				return
			}
			if err == nil {
				rev = r
			}
			// Other errors: try again at the next tick; the lease is
			// several ticks long.
		}
	}()
	unlock := func() {
		cancel(nil)
		<-done
		dctx, dcancel := context.WithTimeout(context.Background(), opTimeout)
		defer dcancel()
		_ = g.kv.Delete(dctx, upgradeLockKey, jetstream.LastRevision(rev))
		_ = sub.Unsubscribe()
	}
	return lctx, unlock, nil
}

// upgradeHolderAlive reports whether the gateway holding the lock still
// runs. Only "no responders" counts as dead.
func (g *Gateway) upgradeHolderAlive(ctx context.Context, id string) bool {
	if id == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := g.nc.RequestWithContext(ctx, upgradeAliveSubject(id), nil)
	return !errors.Is(err, nats.ErrNoResponders)
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

// upgradeStream moves one old stream's queue into its shard.
func (g *Gateway) upgradeStream(ctx context.Context, stream string, stats *upgradeStats, pauseAfter int, jobs *accumJobs) error {
	// The set-up requests share one timeout; the moves have their own.
	sctx, scancel := context.WithTimeout(ctx, opTimeout)
	defer scancel()
	old, err := g.js.Stream(sctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	queue, ok := legacyQueueName(stream, old.CachedInfo().Config)
	if !ok {
		g.log.Warn("stream named like an old-layout queue but not one; left alone", "stream", stream)
		return nil
	}
	if err := g.queues.register(sctx, queue); err != nil {
		return err
	}
	shard, err := g.queues.shard(sctx, mapping.Shard(queue))
	if err != nil {
		return err
	}
	if err := g.upgradeProps(sctx, queue); err != nil {
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
	mv := legacyMove{g: g, queue: queue, stream: stream, old: old, shard: shard, delivered: delivered,
		created: old.CachedInfo().Created}
	moved, expired, unknown, err := mv.run(ctx, stats, pauseAfter)
	if err != nil {
		return err
	}
	jctx, jcancel := context.WithTimeout(ctx, opTimeout)
	defer jcancel()
	if err := g.upgradeJobs(jctx, queue, shard, jobs); err != nil {
		return err
	}
	if unknown > 0 {
		g.log.Warn("old-layout stream keeps messages on subjects the upgrade does not know; not deleted",
			"stream", stream, "queue", queue, "messages", unknown)
	} else if err := g.js.DeleteStream(jctx, stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("delete old stream: %w", err)
	}
	stats.queues.Add(1)
	g.log.Info("upgraded queue", "queue", queue, "from", stream, "to", mapping.StreamName(queue),
		"messages", moved, "expired", expired)
	return nil
}

// upgradeProps moves the queue's own properties to their new key, where it
// differs (hashed names): copy first, then remove the old key.
func (g *Gateway) upgradeProps(ctx context.Context, queue string) error {
	oldKey, newKey := mapping.LegacyPropsKey(queue), mapping.PropsKey(queue)
	if oldKey == newKey {
		return nil
	}
	e, err := g.kv.Get(ctx, oldKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read old properties: %w", err)
	}
	if _, err := g.kv.Put(ctx, newKey, e.Value()); err != nil {
		return fmt.Errorf("write properties: %w", err)
	}
	if err := g.kv.Delete(ctx, oldKey, jetstream.LastRevision(e.Revision())); err != nil {
		return fmt.Errorf("remove old properties: %w", err)
	}
	return nil
}

// legacyMove moves one queue's messages.
type legacyMove struct {
	g         *Gateway
	queue     string
	stream    string
	old       jetstream.Stream
	shard     jetstream.Stream
	delivered uint64
	created   time.Time
}

// run copies every message of the old stream in sequence order, a batch at
// a time: the copies of a batch are published together, and once JetStream
// has stored them all, the originals are removed with one purge up to the
// batch's last sequence. It returns the messages moved, dropped as
// expired, and left behind on subjects it does not know.
func (mv *legacyMove) run(ctx context.Context, stats *upgradeStats, pauseAfter int) (moved, expired, unknown int, err error) {
	// Copies an interrupted run stored before it removed their originals.
	done, err := mv.copied(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	seq := uint64(1)
	for {
		var batch []*nats.Msg
		var last uint64
		keepUnknown := false
		for len(batch) < upgradeBatch {
			rm, err := mv.next(ctx, seq)
			if err != nil {
				return moved, expired, unknown, err
			}
			if rm == nil {
				break
			}
			seq = rm.Sequence + 1
			m, drop := mv.translate(rm)
			switch {
			case m == nil && !drop:
				// Left in place: the purge must stop below it.
				unknown++
				keepUnknown = true
			case drop:
				expired++
				stats.expired.Add(1)
			case done[rm.Sequence]:
				moved++
				stats.moved.Add(1)
			default:
				batch = append(batch, m)
			}
			if keepUnknown {
				break
			}
			last = rm.Sequence
		}
		if err := mv.publish(ctx, batch); err != nil {
			return moved, expired, unknown, err
		}
		moved += len(batch)
		total := stats.moved.Add(int64(len(batch)))
		if pauseAfter >= 0 && total >= int64(pauseAfter) && len(batch) > 0 {
			// The test hook stops at the worst moment: the copies are
			// stored, the originals not removed yet.
			mv.g.log.Warn("upgrade paused by the test hook "+UpgradePauseEnv, "messages", total)
			<-ctx.Done()
			return moved, expired, unknown, ctx.Err()
		}
		if last > 0 {
			pctx, pcancel := context.WithTimeout(ctx, opTimeout)
			err := mv.old.Purge(pctx, jetstream.WithPurgeSequence(last+1))
			pcancel()
			if err != nil {
				return moved, expired, unknown, fmt.Errorf("remove moved messages up to %d: %w", last, err)
			}
		}
		stats.progress(mv.g.log, mv.queue)
		if keepUnknown {
			// Skip the unknown message: the purge of the next batch must
			// not remove it, so this stream is finished message by message.
			return mv.rest(ctx, seq, stats, moved, expired, unknown, done)
		}
		if last == 0 && len(batch) == 0 {
			return moved, expired, unknown, nil
		}
	}
}

// next reads the old stream's first message at or after seq; nil when there
// is none.
func (mv *legacyMove) next(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	rm, err := mv.old.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(mapping.SubjectPrefix+".>"))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read message %d: %w", seq, err)
	}
	return rm, nil
}

// rest finishes a stream that holds a message the upgrade does not know:
// one message at a time, each original deleted by sequence.
func (mv *legacyMove) rest(ctx context.Context, seq uint64, stats *upgradeStats, moved, expired, unknown int, done map[uint64]bool) (int, int, int, error) {
	for {
		rm, err := mv.next(ctx, seq)
		if err != nil || rm == nil {
			return moved, expired, unknown, err
		}
		seq = rm.Sequence + 1
		m, drop := mv.translate(rm)
		switch {
		case m == nil && !drop:
			unknown++
			continue
		case drop:
			expired++
			stats.expired.Add(1)
		default:
			if !done[rm.Sequence] {
				if err := mv.publish(ctx, []*nats.Msg{m}); err != nil {
					return moved, expired, unknown, err
				}
			}
			moved++
			stats.moved.Add(1)
		}
		dctx, dcancel := context.WithTimeout(ctx, opTimeout)
		err = mv.old.DeleteMsg(dctx, rm.Sequence)
		dcancel()
		if err != nil && !msgGone(err) {
			return moved, expired, unknown, fmt.Errorf("remove message %d: %w", rm.Sequence, err)
		}
	}
}

// publish stores copies, pipelined, and returns once JetStream has
// acknowledged every one of them.
func (mv *legacyMove) publish(ctx context.Context, batch []*nats.Msg) error {
	if len(batch) == 0 {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	acks := make([]jetstream.PubAckFuture, 0, len(batch))
	for _, m := range batch {
		f, err := mv.g.js.PublishMsgAsync(m, jetstream.WithExpectStream(mapping.StreamName(mv.queue)))
		if err != nil {
			return fmt.Errorf("store copy: %w", err)
		}
		acks = append(acks, f)
	}
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("store copy: %w", err)
		case <-pctx.Done():
			return fmt.Errorf("store copy: %w", pctx.Err())
		}
	}
	return nil
}

// idPrefix starts the Nats-Msg-Id of this stream's copies. The stream's
// creation time tells apart a stream of the same name created again.
func (mv *legacyMove) idPrefix() string {
	return upgradeMsgIDPrefix + mv.stream + "." + strconv.FormatInt(mv.created.UnixNano(), 10) + "."
}

// copied finds the copies an interrupted run stored of messages the old
// stream may still hold (their originals not removed yet): the queue's
// messages in its shard whose Nats-Msg-Id names this stream. No gateway
// serves while the upgrade runs, so the queue's messages in the shard are
// copies of earlier runs; for a queue not upgraded before there are none,
// and the look costs two requests.
func (mv *legacyMove) copied(ctx context.Context) (map[uint64]bool, error) {
	done := make(map[uint64]bool)
	prefix := mv.idPrefix()
	for _, filter := range mapping.QueueSubjects(mv.queue) {
		if strings.HasPrefix(filter, mapping.SubjectPrefix+".p.") {
			continue // the old layout had no priorities
		}
		for seq := uint64(1); ; {
			gctx, gcancel := context.WithTimeout(ctx, opTimeout)
			rm, err := mv.shard.GetMsg(gctx, seq, jetstream.WithGetMsgSubject(filter))
			gcancel()
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("look for earlier copies: %w", err)
			}
			seq = rm.Sequence + 1
			if n, ok := strings.CutPrefix(rm.Header.Get(jetstream.MsgIDHeader), prefix); ok {
				if old, err := strconv.ParseUint(n, 10, 64); err == nil {
					done[old] = true
				}
			}
		}
	}
	return done, nil
}

// translate builds the copy of an old message on the queue's new subject.
// It returns nil and drop = true for an expired message, nil and false for
// a subject it does not know.
func (mv *legacyMove) translate(rm *jetstream.RawStreamMsg) (m *nats.Msg, drop bool) {
	var target string
	tok := mapping.LegacyEncodeName(mv.queue)
	switch {
	case rm.Subject == mapping.LegacyQueueSubject(mv.queue):
		target = mapping.QueueSubject(mv.queue)
	case rm.Subject == mapping.LegacyPartSubject(mv.queue):
		target = mapping.PartSubject(mv.queue)
	case rm.Subject == mapping.LegacyDeadSubject(mv.queue):
		target = mapping.DeadSubject(mv.queue)
	default:
		id, ok := strings.CutPrefix(rm.Subject, mapping.SubjectPrefix+".s."+tok+".")
		if !ok || id == "" || strings.Contains(id, ".") {
			return nil, false
		}
		target = mapping.ScheduleSubject(mv.queue, id)
	}
	m = nats.NewMsg(target)
	m.Data = rm.Data
	schedule := strings.HasPrefix(rm.Subject, mapping.SubjectPrefix+".s.")
	for k, v := range rm.Header {
		if !strings.HasPrefix(k, "Nats-") || (schedule && strings.HasPrefix(k, "Nats-Schedule")) {
			m.Header[k] = v
		}
	}
	if schedule {
		m.Header.Set("Nats-Schedule-Target", mapping.QueueSubject(mv.queue))
	}
	if target == mapping.QueueSubject(mv.queue) {
		if ns := readStamped(rm.Header).expires; ns != 0 {
			left := time.Until(time.Unix(0, ns))
			if left <= 0 {
				return nil, true
			}
			setNatsTTL(m, left)
		}
		if rm.Sequence <= mv.delivered {
			// Handed out by the old gateway and never settled: JetStream
			// would have counted that delivery at the redelivery.
			n, _ := strconv.Atoi(rm.Header.Get(mapping.HdrDelivered))
			m.Header.Set(mapping.HdrDelivered, strconv.Itoa(n+1))
		}
	}
	if !schedule {
		// A schedule needs none: its subject is its own (one schedule per
		// subject), so storing it again replaces it. And the message it
		// fires must not carry an id that could make it a duplicate.
		m.Header.Set(jetstream.MsgIDHeader, mv.idPrefix()+strconv.FormatUint(rm.Sequence, 10))
	}
	return m, false
}

// accumJobs are the accumulator's close jobs, read once per upgrade: the
// keys by encoded queue name.
type accumJobs struct {
	kv   jetstream.KeyValue
	keys map[string][]string
}

// legacyJobs lists the close jobs of mapping.AccumBucket (nil when the
// bucket does not exist).
func (g *Gateway) legacyJobs(ctx context.Context) (*accumJobs, error) {
	lctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	kv, err := g.js.KeyValue(lctx, mapping.AccumBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("accumulation bucket: %w", err)
	}
	lister, err := kv.ListKeysFiltered(lctx, "j.>")
	if err != nil {
		return nil, fmt.Errorf("list close jobs: %w", err)
	}
	out := &accumJobs{kv: kv, keys: make(map[string][]string)}
	for k := range lister.Keys() {
		if enc, _, ok := strings.Cut(strings.TrimPrefix(k, "j."), "."); ok {
			out.keys[enc] = append(out.keys[enc], k)
		}
	}
	return out, nil
}

// upgradeJobs fixes the accumulator's close jobs of the queue (windows whose
// close was under way when the old gateway stopped): their cut and LQ are
// sequences of the old stream. Every part of the queue is in the shard now
// and no push can have come since (no gateway serves during the upgrade),
// so the cut becomes the shard's last sequence and LQ 0 (the search for an
// earlier compound then starts at the beginning). A part that a dead push
// left past the old cut joins the window (it was never pushed again).
func (g *Gateway) upgradeJobs(ctx context.Context, queue string, shard jetstream.Stream, jobs *accumJobs) error {
	if jobs == nil || len(jobs.keys[mapping.EncodeName(queue)]) == 0 {
		return nil
	}
	kv := jobs.kv
	info, err := shard.Info(ctx)
	if err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	for _, k := range jobs.keys[mapping.EncodeName(queue)] {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("close job %s: %w", k, err)
		}
		var j map[string]json.RawMessage
		if err := json.Unmarshal(e.Value(), &j); err != nil {
			g.log.Warn("ignoring an unreadable close job", "key", k, "err", err)
			continue
		}
		if _, ok := j["cut"]; !ok {
			continue // the close fixes its cut from the shard itself
		}
		j["cut"] = json.RawMessage(strconv.FormatUint(info.State.LastSeq, 10))
		delete(j, "lq")
		b, err := json.Marshal(j)
		if err != nil {
			return err
		}
		if _, err := kv.Update(ctx, k, b, e.Revision()); err != nil {
			return fmt.Errorf("close job %s: %w", k, err)
		}
	}
	return nil
}
