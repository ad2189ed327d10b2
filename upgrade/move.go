package upgrade

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// msgIDPrefix starts the Nats-Msg-Id of every moved message.
const msgIDPrefix = "lmq-upgrade."

// move moves one queue's messages from its old stream into its shard.
type move struct {
	u         *upgrader
	queue     string
	stream    string
	old       jetstream.Stream
	shard     jetstream.Stream
	delivered uint64
	created   time.Time
}

// msgGone reports whether err says the message is not (or no longer) stored.
func msgGone(err error) bool { return jsapi.MsgGone(err) }

// run copies every message of the old stream in sequence order, a batch at
// a time: the copies of a batch are published together, and once JetStream
// has stored them all, the originals are removed with one purge up to the
// batch's last sequence. It returns the messages moved, dropped as
// expired, and left behind on subjects it does not know.
func (mv *move) run(ctx context.Context, st *stats, pauseAfter int) (moved, expired, unknown int, err error) {
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
		for len(batch) < batchSize {
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
				st.expired.Add(1)
			case done[rm.Sequence]:
				moved++
				st.moved.Add(1)
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
		total := st.moved.Add(int64(len(batch)))
		if pauseAfter >= 0 && total >= int64(pauseAfter) && len(batch) > 0 {
			// The test hook stops at the worst moment: the copies are
			// stored, the originals not removed yet.
			mv.u.log.Warn("upgrade paused by the test hook "+PauseEnv, "messages", total)
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
		st.progress(mv.u.log, mv.queue)
		if keepUnknown {
			// Skip the unknown message: the purge of the next batch must
			// not remove it, so this stream is finished message by message.
			return mv.rest(ctx, seq, st, moved, expired, unknown, done)
		}
		if last == 0 && len(batch) == 0 {
			return moved, expired, unknown, nil
		}
	}
}

// next reads the old stream's first message at or after seq; nil when there
// is none.
func (mv *move) next(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
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
func (mv *move) rest(ctx context.Context, seq uint64, st *stats, moved, expired, unknown int, done map[uint64]bool) (int, int, int, error) {
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
			st.expired.Add(1)
		default:
			if !done[rm.Sequence] {
				if err := mv.publish(ctx, []*nats.Msg{m}); err != nil {
					return moved, expired, unknown, err
				}
			}
			moved++
			st.moved.Add(1)
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
func (mv *move) publish(ctx context.Context, batch []*nats.Msg) error {
	if len(batch) == 0 {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	acks := make([]jetstream.PubAckFuture, 0, len(batch))
	for _, m := range batch {
		f, err := mv.u.js.PublishMsgAsync(m, jetstream.WithExpectStream(mapping.StreamName(mv.queue)))
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
func (mv *move) idPrefix() string {
	return msgIDPrefix + mv.stream + "." + strconv.FormatInt(mv.created.UnixNano(), 10) + "."
}

// copied finds the copies an interrupted run stored of messages the old
// stream may still hold (their originals not removed yet): the queue's
// messages in its shard whose Nats-Msg-Id names this stream. No gateway
// serves while the upgrade runs, so the queue's messages in the shard are
// copies of earlier runs; for a queue not upgraded before there are none,
// and the look costs two requests.
func (mv *move) copied(ctx context.Context) (map[uint64]bool, error) {
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
func (mv *move) translate(rm *jetstream.RawStreamMsg) (m *nats.Msg, drop bool) {
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
		if !jsapi.ServerHeader(k) || (schedule && jsapi.ScheduleHeader(k)) {
			m.Header[k] = v
		}
	}
	if schedule {
		jsapi.SetScheduleTarget(m.Header, mapping.QueueSubject(mv.queue))
	}
	if target == mapping.QueueSubject(mv.queue) {
		if ns := expiresAt(rm.Header); ns != 0 {
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

// expiresAt is a message's Lmq-Expires (Unix ns), 0 when it has none or an
// unreadable one, as the core reads it.
func expiresAt(h nats.Header) int64 {
	n, err := strconv.ParseInt(h.Get(mapping.HdrExpires), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// setNatsTTL sets the copy's TTL as a push does (jsapi.SetTTL).
func setNatsTTL(m *nats.Msg, ttl time.Duration) { jsapi.SetTTL(m.Header, ttl) }
