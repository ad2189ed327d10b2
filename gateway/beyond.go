package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Features beyond LMQ (dead letters, batches, introspection). They live in the
// queue's own stream on subjects the queue's consumer does not see:
// lmq.d.<enc> for dead letters, lmq.s.<enc>.<id> for delayed messages.

// MaxBatch is the most messages one atomic batch push may carry (JetStream's
// limit for atomic publishes).
const MaxBatch = 1000

// bury moves a retry-exhausted message to the queue's dead letters, with its
// history: the deliveries it had (Lmq-Delivered) and when it died.
func (g *Gateway) bury(r *raw) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cp := nats.NewMsg(mapping.DeadSubject(r.q.name))
	copyOwnHeaders(cp, r.msg)
	cp.Header.Set(mapping.HdrDelivered, strconv.Itoa(r.used()))
	cp.Header.Set(mapping.HdrDeadAt, time.Now().UTC().Format(time.RFC3339Nano))
	var err error
	if cp.Data, err = g.body(ctx, r); err != nil {
		return err
	}
	if _, err := g.js.PublishMsg(ctx, cp); err != nil {
		return fmt.Errorf("store dead letter: %w", err)
	}
	if err := g.ackRemove(ctx, r); err != nil {
		return fmt.Errorf("remove dead message: %w", err)
	}
	return nil
}

// DeadLetter is a message whose retries were used up, kept because its queue
// has the dead_letter property.
type DeadLetter struct {
	Message    Message
	Deliveries int
	DiedAt     time.Time
	seq        uint64
}

func (g *Gateway) queueStream(ctx context.Context, queue string) (jetstream.Stream, error) {
	if err := validName(queue); err != nil {
		return nil, err
	}
	st, err := g.js.Stream(ctx, mapping.StreamName(queue))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("queue %q: %w", queue, ErrNotFound)
	}
	if err != nil {
		return nil, jsErr("queue", err)
	}
	return st, nil
}

// DeadLetterHead returns the oldest dead letter of queue, nil when none.
func (g *Gateway) DeadLetterHead(ctx context.Context, queue string) (*DeadLetter, error) {
	st, err := g.queueStream(ctx, queue)
	if err != nil {
		return nil, err
	}
	return g.nextDead(ctx, st, queue, 1)
}

func (g *Gateway) nextDead(ctx context.Context, st jetstream.Stream, queue string, from uint64) (*DeadLetter, error) {
	raw, err := st.GetMsg(ctx, from, jetstream.WithGetMsgSubject(mapping.DeadSubject(queue)))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, jsErr("read dead letter", err)
	}
	m := &nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data}
	msg, err := g.DecodeMessage(ctx, m)
	if err != nil {
		return nil, err
	}
	dl := &DeadLetter{Message: msg, seq: raw.Sequence}
	dl.Deliveries = readStamped(raw.Header).delivered
	dl.DiedAt, _ = time.Parse(time.RFC3339Nano, raw.Header.Get(mapping.HdrDeadAt))
	return dl, nil
}

// RespawnDeadLetters moves up to n of the oldest dead letters back into the
// queue with fresh retries; it returns how many moved.
func (g *Gateway) RespawnDeadLetters(ctx context.Context, queue string, n int) (int, error) {
	st, err := g.queueStream(ctx, queue)
	if err != nil {
		return 0, err
	}
	q, err := g.queues.ensure(ctx, queue)
	if err != nil {
		return 0, err
	}
	moved := 0
	for seq := uint64(1); moved < n; {
		raw, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(mapping.DeadSubject(queue)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return moved, jsErr("read dead letter", err)
		}
		m := nats.NewMsg(mapping.QueueSubject(queue))
		copyOwnHeaders(m, &nats.Msg{Header: raw.Header})
		m.Header.Del(mapping.HdrDelivered)
		m.Header.Del(mapping.HdrDeadAt)
		m.Data = raw.Data
		// Store the live copy first: a crash in between leaves a duplicate
		// dead letter, never a lost message.
		if err := g.publish(ctx, q, m, true); err != nil {
			return moved, err
		}
		if err := st.DeleteMsg(ctx, raw.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return moved, jsErr("remove dead letter", err)
		}
		moved++
		seq = raw.Sequence + 1
	}
	if moved > 0 {
		g.Notify(queue)
	}
	return moved, nil
}

// DeleteDeadLetters drops every dead letter of queue; it returns how many.
func (g *Gateway) DeleteDeadLetters(ctx context.Context, queue string) (uint64, error) {
	st, err := g.queueStream(ctx, queue)
	if err != nil {
		return 0, err
	}
	// Large bodies first: after the purge nothing refers to them any more.
	for seq := uint64(1); ; {
		raw, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(mapping.DeadSubject(queue)))
		if err != nil {
			break
		}
		g.dropObject(ctx, &nats.Msg{Header: raw.Header})
		seq = raw.Sequence + 1
	}
	resp, err := purgeSubject(ctx, st, mapping.DeadSubject(queue))
	if err != nil {
		return 0, jsErr("delete dead letters", err)
	}
	return resp, nil
}

// purgeSubject removes every message of one subject and reports how many.
func purgeSubject(ctx context.Context, st jetstream.Stream, subject string) (uint64, error) {
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, err
	}
	n := info.State.Subjects[subject]
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return 0, err
	}
	return n, nil
}

// PushBatch stores msgs in queue atomically (all or none, in order) with
// JetStream's atomic batch publish. Accumulating queues do not take batches.
func (g *Gateway) PushBatch(ctx context.Context, queue string, msgs []Message) error {
	if err := validName(queue); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	if len(msgs) > MaxBatch {
		return fmt.Errorf("%w: a batch holds at most %d messages", ErrInvalid, MaxBatch)
	}
	if _, err := g.queues.ensure(ctx, queue); err != nil {
		return err
	}
	eff := g.props.effective(queue)
	if eff.Accum > 0 {
		return fmt.Errorf("%w: batch push is not available on accumulating queues", ErrInvalid)
	}
	batch := uuid.NewString()
	stored := make([]*nats.Msg, 0, len(msgs))
	defer func() {
		if stored != nil { // not committed: drop the large bodies it stored
			for _, m := range stored {
				g.dropObject(context.Background(), m)
			}
		}
	}()
	var size int
	for i, msg := range msgs {
		if int64(len(msg.Body)) > g.cfg.MaxMessageSize {
			return fmt.Errorf("%w: message %d", ErrTooLarge, i+1)
		}
		// A batch's headers come in its body, so a bad one is a bad body (400).
		if err := CheckHeaders(msg); err != nil {
			return fmt.Errorf("%w: message %d: %v", ErrInvalid, i+1, err)
		}
		m, err := g.EncodeMessage(ctx, queue, mapping.QueueSubject(queue), msg, eff.Retry)
		if err != nil {
			return err
		}
		if ttl := eff.TTLDuration(); ttl > 0 {
			m.Header.Set(mapping.HdrExpires, strconv.FormatInt(time.Now().Add(ttl).UnixNano(), 10))
			setNatsTTL(m, ttl)
		}
		m.Header.Set("Nats-Batch-Id", batch)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		stored = append(stored, m)
		size += len(msg.Body)
	}
	last := stored[len(stored)-1]
	last.Header.Set("Nats-Batch-Commit", "1")
	for _, m := range stored[:len(stored)-1] {
		if err := g.nc.PublishMsg(m); err != nil {
			return jsErr("store batch", err)
		}
	}
	resp, err := g.nc.RequestMsgWithContext(ctx, last)
	if err != nil {
		return jsErr("store batch", err)
	}
	if strings.Contains(string(resp.Data), `"error"`) || len(resp.Data) == 0 {
		return jsErr("store batch", fmt.Errorf("jetstream: %s", resp.Data))
	}
	stored = nil
	g.obs.Pushed(queue, size)
	g.Notify(queue)
	return nil
}

// QueueDetail is the introspection view of one queue.
type QueueDetail struct {
	QueueInfo
	// Delayed messages not yet due.
	Delayed uint64
	// DeadLetters kept for the queue.
	DeadLetters uint64
	// Parts waiting in open accumulation windows.
	Parts uint64
}

// QueueDetail reports a queue's sizes by kind; ErrNotFound if it does not exist.
func (g *Gateway) QueueDetail(ctx context.Context, queue string) (QueueDetail, error) {
	st, err := g.queueStream(ctx, queue)
	if err != nil {
		return QueueDetail{}, err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(mapping.SubjectPrefix+".>"))
	if err != nil {
		return QueueDetail{}, jsErr("queue info", err)
	}
	d := QueueDetail{QueueInfo: QueueInfo{Name: queue, Bytes: info.State.Bytes, Props: g.props.effective(queue)}}
	for subj, n := range info.State.Subjects {
		kind, _, _ := strings.Cut(strings.TrimPrefix(subj, mapping.SubjectPrefix+"."), ".")
		switch kind {
		case "q":
			d.Size += n
		case "s":
			d.Delayed += n
		case "d":
			d.DeadLetters += n
		case "a":
			d.Parts += n
		}
	}
	if c, err := st.Consumer(ctx, mapping.ConsumerName); err == nil {
		d.InFlight = uint64(c.CachedInfo().NumAckPending)
	}
	return d, nil
}
