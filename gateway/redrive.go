package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/gateway/redrive"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// Redrive (beyond LMQ; SQS's RedrivePolicy): a queue whose property
// dead_letter_queue names another queue moves a message whose retries are
// used up into that queue, as a new message there (package redrive, whose
// doc says more).

func newRedrive(g *core) *redrive.Mover {
	return redrive.New(redrive.Config{
		Store:     g.store,
		Disp:      g.disp,
		Props:     g.props,
		AckRemove: g.ackRemove,
		GroupEnd:  g.groupEnd,
		GroupNext: g.groupNext,
		Logger:    g.log,
	})
}

// redriveTarget is the queue retry-exhausted messages of queue move to, ""
// when none (redrive.Mover.Target).
func (g *core) redriveTarget(queue string) string { return g.mover.Target(queue) }

// moved is a message going into another queue as a new message there.
type moved = redrive.Moved

// storeMoved stores mv in the queue target as a new message there
// (redrive.Mover.Store).
func (g *core) storeMoved(ctx context.Context, source, target string, mv moved) (uint64, error) {
	return g.mover.Store(ctx, source, target, mv)
}

// removeExhausted removes a retry-exhausted message that now lives on
// elsewhere (redrive.Mover.RemoveExhausted).
func (g *core) removeExhausted(ctx context.Context, r *dispatch.Raw) {
	g.mover.RemoveExhausted(ctx, r)
}

// redriveID is the Nats-Msg-Id of the message moved from source's stream
// sequence seq to target (redrive.ID).
func redriveID(source, target string, seq uint64) string { return redrive.ID(source, target, seq) }

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
func (g *core) redrive(r *dispatch.Raw, target string) error {
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
		Header: r.Msg.Header, Body: content.Body, PushedAt: pushedAt, Priority: -1,
		ID: redriveID(source, target, r.Seq),
	})
	if err != nil {
		return err
	}
	g.removeExhausted(ctx, r)
	return nil
}
