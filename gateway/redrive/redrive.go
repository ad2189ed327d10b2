// Package redrive moves a message into another queue as a new message
// there (Mover.Store): the redrive of retry-exhausted messages (SQS's
// RedrivePolicy; Target, RemoveExhausted) and an operator's move of a
// waiting one (the core's MoveMessage). What it needs of the core (the
// dispatcher, the properties, a pulled message's removal, the groups'
// moving on) comes in Config.
//
// Redrive (beyond LMQ; SQS's RedrivePolicy): a queue whose property
// dead_letter_queue names another queue moves a message whose retries are
// used up into that queue, as a new message there. A queue naming itself
// (possible through the default list, whose patterns may match the target
// too) is taken as naming none: its messages would never end.
package redrive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/gateway/props"
	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// Config is what a Mover needs of the core.
type Config struct {
	Store *store.Store
	Disp  *dispatch.Dispatcher
	Props *props.Cache
	// AckRemove removes a pulled message (an ack).
	AckRemove func(ctx context.Context, r *dispatch.Raw) error
	// GroupEnd and GroupNext move a message's group on (package groups).
	GroupEnd  func(ctx context.Context, r *dispatch.Raw) (advanced bool, err error)
	GroupNext func(r *dispatch.Raw)
	Logger    *slog.Logger
}

// Mover moves messages into other queues. It holds no state beyond Config,
// so it is safe for concurrent use.
type Mover struct {
	cfg   Config
	store *store.Store
	disp  *dispatch.Dispatcher
	props *props.Cache
	log   *slog.Logger
}

// New returns the Mover of cfg.
func New(cfg Config) *Mover {
	return &Mover{cfg: cfg, store: cfg.Store, disp: cfg.Disp, props: cfg.Props, log: cfg.Logger}
}

// The core's calls, under the names the bodies below use.

func (g *Mover) ackRemove(ctx context.Context, r *dispatch.Raw) error { return g.cfg.AckRemove(ctx, r) }
func (g *Mover) groupEnd(ctx context.Context, r *dispatch.Raw) (bool, error) {
	return g.cfg.GroupEnd(ctx, r)
}
func (g *Mover) groupNext(r *dispatch.Raw) { g.cfg.GroupNext(r) }

// Target is the queue retry-exhausted messages of queue move to, ""
// when none.
func (g *Mover) Target(queue string) string {
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

// Moved is a message going into another queue as a new message there
// (the core's redrive and MoveMessage).
type Moved struct {
	Header   map[string][]string // the original's (nats.Header or bus.Headers): the ones redriven accepts go along
	Body     []byte              // its content (a large body loaded)
	PushedAt time.Time           // its push time, kept
	Priority int                 // its priority there; < 0: the target's priority property
	ID       string              // its Nats-Msg-Id: a repeated move is stored once
}

// Store stores mv in the queue target (created when it does not exist)
// as a new message there: handed out with a fresh delivery count and the
// target's retry, its own headers and push time kept, a large body stored
// anew. The target's ttl counts from that push time, as SQS counts
// retention from the first enqueue: a message older than the target's ttl
// has expired there and is not stored (seq 0, no error). It returns the
// copy's stream sequence and wakes the target's waiting clients.
func (g *Mover) Store(ctx context.Context, source, target string, mv Moved) (uint64, error) {
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
		jsapi.SetTTL(m.Header, ttl)
	}
	// A released copy of the new message drops Nats-* headers, so it is not
	// taken for a duplicate.
	jsapi.SetMsgID(m.Header, mv.ID)
	seq, err := g.store.Publish(ctx, "move message to another queue", q.Name(), m)
	if err != nil {
		if !errors.Is(err, store.ErrUnknown) {
			g.store.Bodies().DropBody(ctx, m)
		}
		return 0, err
	}
	g.disp.NotifyLevel(target, prio)
	return seq, nil
}

// RemoveExhausted removes a retry-exhausted message that now lives on
// elsewhere (or expired), ending its group's head as bury does; a failure
// is logged (the original comes back and is moved again: the target keeps
// one copy within the duplicate window).
func (g *Mover) RemoveExhausted(ctx context.Context, r *dispatch.Raw) {
	advanced, err := g.groupEnd(ctx, r)
	if err != nil {
		g.log.Warn("could not remove a message moved to its dead-letter queue", "queue", r.Queue().Name(), "err", err)
		return
	}
	if err := g.ackRemove(ctx, r); err != nil {
		g.log.Warn("could not remove a message moved to its dead-letter queue", "queue", r.Queue().Name(), "err", err)
		return
	}
	g.store.Bodies().DropBody(ctx, &r.Msg)
	if !advanced {
		g.groupNext(r)
	}
}

// ID is the Nats-Msg-Id of the message moved from source's stream
// sequence seq to target. Not of the form of idempotencyID (a hash, then
// ':'), so no client key can collide with it.
func ID(source, target string, seq uint64) string {
	sum := sha256.Sum256([]byte(source + "\x00" + target))
	return "redrive/" + hex.EncodeToString(sum[:12]) + "/" + strconv.FormatUint(seq, 10)
}
