package gateway

import (
	"context"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lifecycle"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// closeGrace is how long Close waits for background work before cancelling
// it (lifecycle.Work.Close).
const closeGrace = 2 * time.Second

// spawn runs f on a goroutine of its own, counted by g.work; false (and f not
// run) when the gateway is closing. A message left unhandled that way stays
// pending in JetStream and comes back after the consumer's AckWait, as Close
// documents.
func (g *core) spawn(f func(ctx context.Context)) bool { return g.work.Go(f) }

// within runs f on the calling goroutine (a timer's), counted; false (and f
// not run) when the gateway is closing.
func (g *core) within(f func(ctx context.Context)) bool { return g.work.Within(f) }

// counted wraps a subscription's handler so that it counts as background
// work: Unsubscribe does not wait for a handler already running, Close does.
// Messages arriving once the gateway is closing are ignored.
func (g *core) counted(h bus.Handler) bus.Handler { return lifecycle.Counted(g.work, h) }

// opContext bounds one background JetStream operation: opTimeout, and the
// gateway's lifetime.
func (g *core) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(g.work.Context(), opTimeout)
}
