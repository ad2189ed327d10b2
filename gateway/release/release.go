// Package release holds what becomes of a pulled message that no client
// acked: released (a copy at the tail of its queue, carrying the
// deliveries used so far, then the original removed) or, its retries used
// up, discarded: moved into its dead-letter queue (package redrive), kept
// as a dead letter in its own stream, or dropped. It also holds the other
// side of the dead letters: their respawn into the queue and their
// deletion.
//
// It is apart from package gateway because a message's fate needs only the
// message pulled (dispatch.Raw) and the parts that store and move it (the
// store, the dispatcher's notifications, the properties, the groups and the
// mover), not the deliveries or the front ends' API. Package gateway calls
// it when a delivery ends unacked (a nack, a timeout, a client gone), and
// the dispatcher through dispatch.Rules. It imports neither package
// gateway nor nats.go.
package release

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/gateway/groups"
	"github.com/lmq-gateway/lmq-gateway/gateway/props"
	"github.com/lmq-gateway/lmq-gateway/gateway/redrive"
	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// Observer is told of a message discarded (its retries used up): the
// core's statistics observer.
type Observer interface {
	Discarded(queue string)
}

// Config is what a Releaser works with.
type Config struct {
	Store  *store.Store
	Disp   *dispatch.Dispatcher
	Props  *props.Cache
	Groups *groups.Groups
	Mover  *redrive.Mover
	Obs    Observer
	// OpContext bounds one background operation (the core's lifetime and
	// its operation timeout).
	OpContext func() (context.Context, context.CancelFunc)
	// OpTimeout bounds the keeping of a dead letter, which goes on when the
	// core is closing.
	OpTimeout time.Duration
	Logger    *slog.Logger
}

// Releaser releases and discards pulled messages.
type Releaser struct {
	store  *store.Store
	disp   *dispatch.Dispatcher
	props  *props.Cache
	groups *groups.Groups
	mover  *redrive.Mover
	obs    Observer
	opCtx  func() (context.Context, context.CancelFunc)
	opTime time.Duration
	log    *slog.Logger
}

// New is a Releaser of cfg.
func New(cfg Config) *Releaser {
	return &Releaser{store: cfg.Store, disp: cfg.Disp, props: cfg.Props, groups: cfg.Groups,
		mover: cfg.Mover, obs: cfg.Obs, opCtx: cfg.OpContext, opTime: cfg.OpTimeout, log: cfg.Logger}
}

// Release puts a message back at the tail of its queue: a copy carrying the
// deliveries used so far is stored first, then the original is removed (a
// crash in between duplicates the message; it never loses it). counted says
// whether the delivery that ends here used up one of the message's retries.
func (g *Releaser) Release(r *dispatch.Raw, counted bool) {
	used := r.Used()
	if !counted {
		used--
	}
	if used >= r.Retry+1 {
		g.Discard(r)
		return
	}
	ctx, cancel := g.opCtx()
	defer cancel()
	// To the tail of its own priority's subject (dispatch/priority.go).
	subj := r.Queue().Subject()
	if r.Level > 0 {
		subj = mapping.PrioritySubject(r.Queue().Name(), r.Level)
	}
	if r.Group != "" {
		// Still its group's one head (package groups): stored only while
		// the original is the last message there.
		subj = r.Msg.Subject
	}
	cp := bus.NewMsg(subj)
	CopyOwnHeaders(cp, r.Msg.Header)
	cp.Header.Set(mapping.HdrDelivered, strconv.Itoa(used))
	if r.Receives > 0 {
		// Handed out to a client (counted or not: a visibility of 0 is a
		// receive that used no retry).
		cp.Header.Set(mapping.HdrReceives, strconv.Itoa(r.Receives))
		cp.Header.Set(mapping.HdrFirstReceived, strconv.FormatInt(r.FirstReceived, 10))
	}
	if r.Group != "" {
		jsapi.SetExpectLastSubjectSeq(cp.Header, r.Seq)
	}
	if ns := store.ReadStamps(r.Msg.Header).Expires; ns != 0 {
		// The copy must expire when the original would have.
		left := time.Until(time.Unix(0, ns))
		if left <= 0 {
			g.Drop(r)
			return
		}
		if r.Group == "" {
			// (A head is not removed by JetStream: its group would stay
			// without one. The gateway drops it when pulled expired.)
			jsapi.SetTTL(cp.Header, left)
		}
	}
	var err error
	if cp.Data, err = g.Body(ctx, r); err != nil {
		if store.NotStored(err) {
			// Already gone: an ack whose answer was lost (ErrUnknown) did
			// take effect, or JetStream's backstop redelivered the message
			// and another client acked it. Nothing to put back.
			g.log.Debug("released message no longer stored", "queue", r.Queue().Name(), "seq", r.Seq)
			return
		}
		g.log.Error("could not release message; it returns after the backstop timeout", "queue", r.Queue().Name(), "err", err)
		return
	}
	if _, err := g.store.Publish(ctx, "release message", r.Queue().Name(), cp); store.WrongLast(err) {
		// A newer copy of this head is stored already: this one just goes.
		g.log.Debug("released group head replaced meanwhile", "queue", r.Queue().Name(), "group", r.Group)
	} else if err != nil {
		// Leave the original pending: JetStream's AckWait brings it back.
		g.log.Error("could not release message; it returns after the backstop timeout", "queue", r.Queue().Name(), "err", err)
		return
	}
	if err := g.store.Ack(ctx, &r.Msg); err != nil {
		g.log.Warn("released message not removed; it may be delivered twice", "queue", r.Queue().Name(), "err", err)
	}
	g.disp.NotifyLevel(r.Queue().Name(), r.Level)
}

// CopyOwnHeaders copies the message's headers except JetStream's own
// (Nats-*): a copy must not inherit a batch id, a message id (it would be
// dropped as a duplicate), a TTL or schedule markers of the original.
func CopyOwnHeaders(dst *bus.Msg, src bus.Headers) { jsapi.CopyOwnHeaders(dst.Header, src) }

// Body returns the stored body of r, reading it from the stream when the
// delivery let go of it.
func (g *Releaser) Body(ctx context.Context, r *dispatch.Raw) ([]byte, error) {
	if !r.BodyGone {
		return r.Msg.Data, nil
	}
	return g.store.ReadBack(ctx, r.Queue().Name(), r.Seq)
}

// Discard ends a message whose retries are used up: it moves to the queue
// its dead_letter_queue property names (moveOn), else it becomes a dead
// letter when the queue keeps them (the dead_letter property), else it is
// dropped as LMQ did. A move that fails falls back to the others.
func (g *Releaser) Discard(r *dispatch.Raw) {
	if target := g.mover.Target(r.Queue().Name()); target != "" {
		err := g.moveOn(r, target)
		if err == nil {
			g.obs.Discarded(r.Queue().Name())
			return
		}
		g.log.Warn("could not move message to its dead-letter queue; keeping it as a dead letter or dropping it",
			"queue", r.Queue().Name(), "dead_letter_queue", target, "err", err)
	}
	if g.props.Effective(r.Queue().Name()).DeadLetter {
		err := g.bury(r)
		if err == nil {
			g.obs.Discarded(r.Queue().Name())
			return
		}
		g.log.Warn("could not keep dead letter; dropping it", "queue", r.Queue().Name(), "err", err)
	}
	g.Drop(r)
	g.obs.Discarded(r.Queue().Name())
}

// Drop removes a message (and its large body) for good.
func (g *Releaser) Drop(r *dispatch.Raw) {
	ctx, cancel := g.opCtx()
	defer cancel()
	advanced, err := g.groups.End(ctx, r)
	if err != nil {
		g.log.Warn("could not remove message", "queue", r.Queue().Name(), "err", err)
		return
	}
	if err := g.store.Ack(ctx, &r.Msg); err != nil {
		g.log.Warn("could not remove message", "queue", r.Queue().Name(), "err", err)
		return
	}
	g.store.Bodies().DropBody(ctx, &r.Msg)
	if !advanced {
		g.groups.Next(r)
	}
}

// moveOn moves r, whose retries are used up, into the queue target as a
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
func (g *Releaser) moveOn(r *dispatch.Raw, target string) error {
	ctx, cancel := g.opCtx()
	defer cancel()
	source := r.Queue().Name()
	body, err := g.Body(ctx, r)
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
	_, err = g.mover.Store(ctx, source, target, redrive.Moved{
		Header: r.Msg.Header, Body: content.Body, PushedAt: pushedAt, Priority: -1,
		ID: redrive.ID(source, target, r.Seq),
	})
	if err != nil {
		return err
	}
	g.mover.RemoveExhausted(ctx, r)
	return nil
}
