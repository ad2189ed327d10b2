package gateway

import (
	"context"

	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/gateway/groups"
)

// Ordered message groups (issue 27) are package groups' (gateway/groups,
// its doc says how they map onto JetStream); these are the core's calls
// into it.

func newGroups(g *core) *groups.Groups {
	return groups.New(groups.Config{
		Store:     g.store,
		Disp:      g.disp,
		OpContext: g.opContext,
		AckRemove: g.ackRemove,
		Logger:    g.log,
		Noise:     g.noise,
	})
}

// promoteGroup gives queue's group a head if it has none (groups.Promote).
func (g *core) promoteGroup(ctx context.Context, queue, group string) error {
	return g.groups.Promote(ctx, queue, group)
}

// groupNext promotes the next message of r's group once r is removed
// (groups.Next).
func (g *core) groupNext(r *dispatch.Raw) { g.groups.Next(r) }

// groupEnd begins the end of r, a group's head (groups.End).
func (g *core) groupEnd(ctx context.Context, r *dispatch.Raw) (advanced bool, err error) {
	return g.groups.End(ctx, r)
}

// staleHead reports whether r, a group's head, must not be delivered
// (groups.Stale).
func (g *core) staleHead(ctx context.Context, r *dispatch.Raw) bool { return g.groups.Stale(ctx, r) }

// dropStale removes a stale head (groups.DropStale).
func (g *core) dropStale(r *dispatch.Raw) { g.groups.DropStale(r) }

// sweepGroups gives a head to each of queue's groups that has none
// (dispatch.Rules.Groups; groups.Sweep).
func (g *core) sweepGroups(queue string) bool { return g.groups.Sweep(queue) }

// groupPushSubject checks a grouped push's options and returns the subject
// it is stored on (groups.PushSubject).
func groupPushSubject(queue string, opts PushOptions) (string, error) {
	return groups.PushSubject(queue, opts)
}

// groupHeadGone ends the current message of the queue's group whose head
// copy was removed without a delivery (groups.HeadGone).
func (g *core) groupHeadGone(ctx context.Context, queue, group string, backlogSeq uint64) error {
	return g.groups.HeadGone(ctx, queue, group, backlogSeq)
}
