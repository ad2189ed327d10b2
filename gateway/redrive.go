package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// Redrive (beyond LMQ; SQS's RedrivePolicy): a queue whose property
// dead_letter_queue names another queue moves a message whose retries are
// used up into that queue, as a new message there. A queue naming itself
// (possible through the default list, whose patterns may match the target
// too) is taken as naming none: its messages would never end.

// redriveTarget is the queue retry-exhausted messages of queue move to, ""
// when none.
func (g *Gateway) redriveTarget(queue string) string {
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

// redrive moves r, whose retries are used up, into the queue target as a
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
func (g *Gateway) redrive(r *dispatch.Raw, target string) error {
	ctx, cancel := g.opContext()
	defer cancel()
	source := r.Queue().Name()
	body, err := g.body(ctx, r)
	if err != nil {
		return fmt.Errorf("read message: %w", err)
	}
	stored := &bus.Msg{Subject: r.Msg.Subject, Header: r.Msg.Header, Data: body}
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
	_, err = g.storeMoved(ctx, source, target, moved{
		header: r.Msg.Header, body: content.Body, pushedAt: pushedAt, priority: -1,
		id: redriveID(source, target, r.Seq),
	})
	if err != nil {
		return err
	}
	g.removeExhausted(ctx, r)
	return nil
}

// moved is a message going into another queue as a new message there
// (redrive, MoveMessage).
type moved struct {
	header   map[string][]string // the original's (bus.Headers): the ones redriven accepts go along
	body     []byte              // its content (a large body loaded)
	pushedAt time.Time           // its push time, kept
	priority int                 // its priority there; < 0: the target's priority property
	id       string              // its Nats-Msg-Id: a repeated move is stored once
}

// storeMoved stores mv in the queue target (created when it does not exist)
// as a new message there: handed out with a fresh delivery count and the
// target's retry, its own headers and push time kept, a large body stored
// anew. The target's ttl counts from that push time, as SQS counts
// retention from the first enqueue: a message older than the target's ttl
// has expired there and is not stored (seq 0, no error). It returns the
// copy's stream sequence and wakes the target's waiting clients.
func (g *Gateway) storeMoved(ctx context.Context, source, target string, mv moved) (uint64, error) {
	q, err := g.disp.Bind(ctx, target, true)
	if err != nil {
		return 0, err
	}
	eff := g.props.Effective(target)
	prio := mv.priority
	if prio < 0 {
		prio = eff.Priority
	}
	var ttl time.Duration
	if t := eff.TTLDuration(); t > 0 {
		if ttl = time.Until(mv.pushedAt.Add(t)); ttl <= 0 {
			g.log.Debug("moved message older than its target queue's ttl; dropped",
				"queue", source, "target", target)
			return 0, nil
		}
	}
	subject := mapping.PrioritySubject(target, prio)
	m, err := g.store.Encode(ctx, target, subject, store.Content{Body: mv.body}, eff.Retry)
	if err != nil {
		return 0, err
	}
	for k, v := range mv.header {
		if redriven(k) {
			m.Header[k] = v // the content type, kept headers (Lmq-Keep-*), the message's own
		}
	}
	m.Header.Set(mapping.HdrPushedAt, strconv.FormatInt(mv.pushedAt.UnixNano(), 10))
	if prio > 0 {
		m.Header.Set(mapping.HdrPriority, strconv.Itoa(prio))
	}
	if ttl > 0 {
		m.Header.Set(mapping.HdrExpires, strconv.FormatInt(mv.pushedAt.Add(eff.TTLDuration()).UnixNano(), 10))
		setNatsTTL(m, ttl)
	}
	// A released copy of the new message drops Nats-* headers, so it is not
	// taken for a duplicate.
	jsapi.SetMsgID(m.Header, mv.id)
	seq, err := g.store.Publish(ctx, "move message to another queue", q.Name(), m)
	if err != nil {
		if !errors.Is(err, ErrUnknown) {
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
func (g *Gateway) removeExhausted(ctx context.Context, r *dispatch.Raw) {
	advanced, err := g.groupEnd(ctx, r)
	if err != nil {
		g.log.Warn("could not remove a message moved to its dead-letter queue", "queue", r.Queue().Name(), "err", err)
		return
	}
	if err := g.ackRemove(ctx, r); err != nil {
		g.log.Warn("could not remove a message moved to its dead-letter queue", "queue", r.Queue().Name(), "err", err)
		return
	}
	g.store.DropBody(ctx, &r.Msg)
	if !advanced {
		g.groupNext(r)
	}
}

// redriveID is the Nats-Msg-Id of the message moved from source's stream
// sequence seq to target. Not of the form of idempotencyID (a hash, then
// ':'), so no client key can collide with it.
func redriveID(source, target string, seq uint64) string {
	sum := sha256.Sum256([]byte(source + "\x00" + target))
	return "redrive/" + hex.EncodeToString(sum[:12]) + "/" + strconv.FormatUint(seq, 10)
}
