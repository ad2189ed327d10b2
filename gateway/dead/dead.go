// Package dead ends the messages whose retries are used up: kept as dead
// letters in the queue's own stream (Bury; later Respawn or Delete), or
// moved into the queue their queue's dead_letter_queue property names
// (Redrive), as MoveMessage moves a waiting one (StoreMoved). What it
// needs of the core (the dispatcher, the properties, a pulled message's
// body and removal, the groups' moving on) comes in Config.
//
// Dead letters (beyond LMQ) live in the queue's own stream on a subject the
// queue's consumer does not see: mapping.DeadSubject (lmq.d.<enc>).
package dead

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/gateway/props"
	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// Config is what Keeper needs of the core.
type Config struct {
	Store *store.Store
	Disp  *dispatch.Dispatcher
	Props *props.Cache
	// Shard is the handle on an existing queue's shard stream: ErrNotFound
	// when the queue does not exist.
	Shard func(ctx context.Context, queue string) (*store.Shard, error)
	// Body is a pulled message's stored body (read back when the delivery
	// let go of it).
	Body func(ctx context.Context, r *dispatch.Raw) ([]byte, error)
	// AckRemove removes a pulled message (an ack).
	AckRemove func(ctx context.Context, r *dispatch.Raw) error
	// GroupEnd and GroupNext move a message's group on (package groups).
	GroupEnd  func(ctx context.Context, r *dispatch.Raw) (advanced bool, err error)
	GroupNext func(r *dispatch.Raw)
	// OpContext is the context of one background operation of the core;
	// Timeout bounds a burial.
	OpContext func() (context.Context, context.CancelFunc)
	Timeout   time.Duration
	Logger    *slog.Logger
}

// Keeper ends retry-exhausted messages and handles dead letters. It holds
// no state beyond Config, so it is safe for concurrent use.
type Keeper struct {
	cfg   Config
	store *store.Store
	disp  *dispatch.Dispatcher
	props *props.Cache
	log   *slog.Logger
}

// New returns the Keeper of cfg.
func New(cfg Config) *Keeper {
	return &Keeper{cfg: cfg, store: cfg.Store, disp: cfg.Disp, props: cfg.Props, log: cfg.Logger}
}

// The core's calls, under the names the bodies below use.

func (g *Keeper) body(ctx context.Context, r *dispatch.Raw) ([]byte, error) {
	return g.cfg.Body(ctx, r)
}
func (g *Keeper) ackRemove(ctx context.Context, r *dispatch.Raw) error {
	return g.cfg.AckRemove(ctx, r)
}
func (g *Keeper) groupEnd(ctx context.Context, r *dispatch.Raw) (bool, error) {
	return g.cfg.GroupEnd(ctx, r)
}
func (g *Keeper) groupNext(r *dispatch.Raw)                        { g.cfg.GroupNext(r) }
func (g *Keeper) opContext() (context.Context, context.CancelFunc) { return g.cfg.OpContext() }
func (g *Keeper) queueShard(ctx context.Context, q string) (*store.Shard, error) {
	return g.cfg.Shard(ctx, q)
}

func copyOwnHeaders(dst, src *nats.Msg)         { jsapi.CopyOwnHeaders(dst.Header, src.Header) }
func setNatsTTL(m *nats.Msg, ttl time.Duration) { jsapi.SetTTL(m, ttl) }

// Bury moves a retry-exhausted message to the queue's dead letters, with its
// history: the deliveries it had (Lmq-Delivered) and when it died.
func (g *Keeper) Bury(r *dispatch.Raw) error {
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.Timeout)
	defer cancel()
	cp := nats.NewMsg(mapping.DeadSubject(r.Queue().Name()))
	copyOwnHeaders(cp, r.Msg)
	if r.Level > 0 {
		// Kept for a respawn (one a NATS program published lacks it).
		cp.Header.Set(mapping.HdrPriority, strconv.Itoa(r.Level))
	}
	cp.Header.Set(mapping.HdrDelivered, strconv.Itoa(r.Used()))
	cp.Header.Set(mapping.HdrDeadAt, time.Now().UTC().Format(time.RFC3339Nano))
	cp.Header.Del(mapping.HdrGroupSeq) // (its group goes on without it)
	var err error
	if cp.Data, err = g.body(ctx, r); err != nil {
		return err
	}
	if _, err := g.store.Publish(ctx, "store dead letter", r.Queue().Name(), cp); err != nil {
		return err
	}
	advanced, err := g.groupEnd(ctx, r)
	if err != nil {
		return fmt.Errorf("remove dead message: %w", err)
	}
	if err := g.ackRemove(ctx, r); err != nil {
		return fmt.Errorf("remove dead message: %w", err)
	}
	if !advanced {
		g.groupNext(r)
	}
	return nil
}

// Respawn moves up to n of the oldest dead letters back into the
// queue with fresh retries; it returns how many moved.
func (g *Keeper) Respawn(ctx context.Context, queue string, n int) (int, error) {
	sh, err := g.queueShard(ctx, queue)
	if err != nil {
		return 0, err
	}
	q, err := g.disp.Ensure(ctx, queue)
	if err != nil {
		return 0, err
	}
	moved, levels := 0, uint16(0)
	for seq := uint64(1); moved < n; {
		raw, err := sh.Next(ctx, mapping.DeadSubject(queue), seq)
		if err != nil {
			return moved, fmt.Errorf("read dead letter: %w", err) // classified by the store
		}
		if raw == nil {
			break
		}
		// Back to its own priority (the Lmq-Priority header it kept).
		p := store.MessagePriority("", raw.Header)
		levels |= 1 << p
		m := nats.NewMsg(mapping.PrioritySubject(queue, p))
		copyOwnHeaders(m, &nats.Msg{Header: nats.Header(raw.Header)})
		m.Header.Del(mapping.HdrDelivered)
		m.Header.Del(mapping.HdrDeadAt)
		m.Data = raw.Data
		// Store the live copy first: a crash in between leaves a duplicate
		// dead letter, never a lost message.
		if _, err := g.store.Publish(ctx, "respawn dead letter", q.Name(), m); err != nil {
			return moved, err
		}
		if err := sh.Delete(ctx, raw.Seq); err != nil {
			return moved, fmt.Errorf("remove dead letter: %w", err)
		}
		moved++
		seq = raw.Seq + 1
	}
	for p := mapping.MaxPriority; p >= 0; p-- {
		if levels&(1<<p) != 0 {
			g.disp.NotifyLevel(queue, p)
		}
	}
	return moved, nil
}

// Delete drops every dead letter of queue; it returns how many.
func (g *Keeper) Delete(ctx context.Context, queue string) (uint64, error) {
	sh, err := g.queueShard(ctx, queue)
	if err != nil {
		return 0, err
	}
	// Large bodies first: after the purge nothing refers to them any more.
	for seq := uint64(1); ; {
		raw, err := sh.Next(ctx, mapping.DeadSubject(queue), seq)
		if err != nil || raw == nil {
			break
		}
		g.store.DropBody(ctx, &nats.Msg{Header: nats.Header(raw.Header)})
		seq = raw.Seq + 1
	}
	n, err := sh.PurgeSubject(ctx, mapping.DeadSubject(queue))
	if err != nil {
		return 0, fmt.Errorf("delete dead letters: %w", err)
	}
	return n, nil
}

// Redrive (beyond LMQ; SQS's RedrivePolicy): a queue whose property
// dead_letter_queue names another queue moves a message whose retries are
// used up into that queue, as a new message there. A queue naming itself
// (possible through the default list, whose patterns may match the target
// too) is taken as naming none: its messages would never end.

// RedriveTarget is the queue retry-exhausted messages of queue move to, ""
// when none.
func (g *Keeper) RedriveTarget(queue string) string {
	t := g.props.Effective(queue).DeadLetterQueue
	if t == queue {
		return ""
	}
	return t
}

// redriven says whether a header of a retry-exhausted message goes with it
// into its dead-letter queue. Not: JetStream's own (a message id, a TTL),
// its history in the old queue (deliveries, first receipt, death), its
// place there (priority, ordered group, accumulation window) and what the
// new queue stamps anew (retry, expiry, the push time set from the
// original's, and a large body's reference: the body is stored anew).
func redriven(h string) bool {
	if jsapi.ServerHeader(h) {
		return false
	}
	switch h {
	case mapping.HdrDelivered, mapping.HdrFirstReceived, mapping.HdrReceives, mapping.HdrDeadAt,
		mapping.HdrPriority, mapping.HdrGroup, mapping.HdrGroupSeq, mapping.HdrWindow,
		mapping.HdrRetry, mapping.HdrExpires, mapping.HdrObject, mapping.HdrPushedAt:
		return false
	}
	return true
}

// Redrive moves r, whose retries are used up, into the queue target as a
// new message (handed out with a fresh delivery count and the target's
// retry), then removes the original. It returns an error when the message
// could not be stored there; the original is then still in place.
//
// What the message keeps: its content and content type, its kept headers
// and any other headers of its own (a NATS program's, a front end's message
// attributes), and its push time (Lmq-Pushed: SQS keeps a message's
// SentTimestamp in its dead-letter queue). The target's ttl counts from that
// push time, as SQS counts retention from the first enqueue: a message
// older than the target's ttl has expired there and is not stored.
func (g *Keeper) Redrive(r *dispatch.Raw, target string) error {
	ctx, cancel := g.opContext()
	defer cancel()
	source := r.Queue().Name()
	body, err := g.body(ctx, r)
	if err != nil {
		return fmt.Errorf("read message: %w", err)
	}
	stored := &nats.Msg{Subject: r.Msg.Subject, Header: r.Msg.Header, Data: body}
	content, err := g.store.Decode(ctx, stored) // a large body is loaded, to be stored anew
	if err != nil {
		return fmt.Errorf("read message: %w", err)
	}
	pushedAt := time.Now()
	if r.PushedAt > 0 {
		pushedAt = time.Unix(0, r.PushedAt)
	}
	// Stored once even when the original comes back after a failure below
	// (or a crash) and is moved again within the duplicate window.
	_, err = g.StoreMoved(ctx, source, target, Moved{
		Header: r.Msg.Header, Body: content.Body, PushedAt: pushedAt, Priority: -1,
		ID: RedriveID(source, target, r.Seq),
	})
	if err != nil {
		return err
	}
	g.removeExhausted(ctx, r)
	return nil
}

// Moved is a message going into another queue as a new message there
// (Redrive, the core's MoveMessage).
type Moved struct {
	Header   map[string][]string // the original's (nats.Header or store.Headers): the ones redriven accepts go along
	Body     []byte              // its content (a large body loaded)
	PushedAt time.Time           // its push time, kept
	Priority int                 // its priority there; < 0: the target's priority property
	ID       string              // its Nats-Msg-Id: a repeated move is stored once
}

// StoreMoved stores mv in the queue target (created when it does not exist)
// as a new message there: handed out with a fresh delivery count and the
// target's retry, its own headers and push time kept, a large body stored
// anew. The target's ttl counts from that push time, as SQS counts
// retention from the first enqueue: a message older than the target's ttl
// has expired there and is not stored (seq 0, no error). It returns the
// copy's stream sequence and wakes the target's waiting clients.
func (g *Keeper) StoreMoved(ctx context.Context, source, target string, mv Moved) (uint64, error) {
	q, err := g.disp.Bind(ctx, target, true)
	if err != nil {
		return 0, err
	}
	eff := g.props.Effective(target)
	prio := mv.Priority
	if prio < 0 {
		prio = eff.Priority
	}
	var ttl time.Duration
	if t := eff.TTLDuration(); t > 0 {
		if ttl = time.Until(mv.PushedAt.Add(t)); ttl <= 0 {
			g.log.Debug("moved message older than its target queue's ttl; dropped",
				"queue", source, "target", target)
			return 0, nil
		}
	}
	subject := mapping.PrioritySubject(target, prio)
	m, err := g.store.Encode(ctx, target, subject, store.Content{Body: mv.Body}, eff.Retry)
	if err != nil {
		return 0, err
	}
	for k, v := range mv.Header {
		if redriven(k) {
			m.Header[k] = v // the content type, kept headers (Lmq-Keep-*), the message's own
		}
	}
	m.Header.Set(mapping.HdrPushedAt, strconv.FormatInt(mv.PushedAt.UnixNano(), 10))
	if prio > 0 {
		m.Header.Set(mapping.HdrPriority, strconv.Itoa(prio))
	}
	if ttl > 0 {
		m.Header.Set(mapping.HdrExpires, strconv.FormatInt(mv.PushedAt.Add(eff.TTLDuration()).UnixNano(), 10))
		setNatsTTL(m, ttl)
	}
	// A released copy of the new message drops Nats-* headers, so it is not
	// taken for a duplicate.
	jsapi.SetMsgID(m, mv.ID)
	seq, err := g.store.Publish(ctx, "move message to another queue", q.Name(), m)
	if err != nil {
		if !errors.Is(err, store.ErrUnknown) {
			g.store.DropBody(ctx, m)
		}
		return 0, err
	}
	g.disp.NotifyLevel(target, prio)
	return seq, nil
}

// removeExhausted removes a retry-exhausted message that now lives on
// elsewhere (or expired), ending its group's head as bury does; a failure
// is logged (the original comes back and is moved again: the target keeps
// one copy within the duplicate window).
func (g *Keeper) removeExhausted(ctx context.Context, r *dispatch.Raw) {
	advanced, err := g.groupEnd(ctx, r)
	if err != nil {
		g.log.Warn("could not remove a message moved to its dead-letter queue", "queue", r.Queue().Name(), "err", err)
		return
	}
	if err := g.ackRemove(ctx, r); err != nil {
		g.log.Warn("could not remove a message moved to its dead-letter queue", "queue", r.Queue().Name(), "err", err)
		return
	}
	g.store.DropBody(ctx, r.Msg)
	if !advanced {
		g.groupNext(r)
	}
}

// RedriveID is the Nats-Msg-Id of the message moved from source's stream
// sequence seq to target. Not of the form of idempotencyID (a hash, then
// ':'), so no client key can collide with it.
func RedriveID(source, target string, seq uint64) string {
	sum := sha256.Sum256([]byte(source + "\x00" + target))
	return "redrive/" + hex.EncodeToString(sum[:12]) + "/" + strconv.FormatUint(seq, 10)
}
