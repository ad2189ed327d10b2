package gateway

import (
	"github.com/lmq-gateway/lmq-gateway/gateway/redrive"
)

// Redrive (beyond LMQ; SQS's RedrivePolicy): a queue whose property
// dead_letter_queue names another queue moves a message whose retries are
// used up into that queue, as a new message there (package redrive, whose
// doc says more; the move itself is package release's). newRedrive comes
// after newGroups.

func newRedrive(g *core) *redrive.Mover {
	return redrive.New(redrive.Config{
		Store:     g.store,
		Disp:      g.disp,
		Props:     g.props,
		AckRemove: g.ackRemove,
		GroupEnd:  g.groups.End,
		GroupNext: g.groups.Next,
		Logger:    g.log,
	})
}
