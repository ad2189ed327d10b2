package gateway

import (
	"context"

	"github.com/lmq-gateway/lmq-gateway/gateway/redrive"
)

// Redrive (beyond LMQ; SQS's RedrivePolicy): a queue whose property
// dead_letter_queue names another queue moves a message whose retries are
// used up into that queue, as a new message there (package redrive, whose
// doc says more; the move itself is package release's).

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

// moved is a message going into another queue as a new message there.
type moved = redrive.Moved

// storeMoved stores mv in the queue target as a new message there
// (redrive.Mover.Store).
func (g *core) storeMoved(ctx context.Context, source, target string, mv moved) (uint64, error) {
	return g.mover.Store(ctx, source, target, mv)
}

// redriveID is the Nats-Msg-Id of the message moved from source's stream
// sequence seq to target (redrive.ID).
func redriveID(source, target string, seq uint64) string { return redrive.ID(source, target, seq) }
