package gateway

import (
	"github.com/lmq-gateway/lmq-gateway/gateway/groups"
)

// Ordered message groups (issue 27) are package groups' (gateway/groups,
// its doc says how they map onto JetStream); the core calls g.groups
// directly (push, deliver, reply; package release, redrive and waiting
// too).

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
