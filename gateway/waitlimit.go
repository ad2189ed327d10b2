package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/waits"
)

// ErrBusy: a pull that would wait found Config.MaxWaitingPulls pulls waiting
// already. It is ErrUnavailable (nothing happened, the same pull may succeed
// soon), so HTTP answers 503 with Retry-After and RPC "unavailable", but its
// text does not blame JetStream.
var ErrBusy error = busyError{}

type busyError struct{}

func (busyError) Error() string { return "too many waiting pulls on this gateway" }
func (busyError) Unwrap() error { return ErrUnavailable }

// WaitingPull is a pull waiting for a message now (waits.Pull).
type WaitingPull = waits.Pull

// MaxListedPulls bounds the pulls WaitingClients lists (the counts cover
// them all).
const MaxListedPulls = waits.MaxListed

// waitSlot takes one of the Config.MaxWaitingPulls slots for a pull that may
// wait (wait != 0; a pull with t=0 never holds a client for long and is not
// counted), and returns its release. The limit is here, in the core, so that
// it covers every front end alike (HTTP, RPC and SQS): a waiting pull costs a
// goroutine, a connection and a place in its queues' waiter lists, however it
// arrived. Beyond the limit it returns ErrBusy at once.
//
// The pull is also listed, for the console's Clients page (WaitingClients):
// the client's kind and address (WithClient on ctx), what it waits on
// (a queue, or "pull-any: <regexp>") and since when.
func (g *core) waitSlot(ctx context.Context, wait time.Duration, what string) (release func(), err error) {
	if wait == 0 {
		return func() {}, nil
	}
	release, ok := g.waits.Take(WaitingPull{Client: clientOf(ctx), Waits: what, Since: time.Now()})
	if !ok {
		return nil, fmt.Errorf("%w (limit %d); try again", ErrBusy, g.cfg.MaxWaitingPulls)
	}
	return release, nil
}

// WaitingClients lists the pulls waiting on this gateway now, longest
// waiting first, at most MaxListedPulls of them, and counts them all by
// client kind.
func (g *Inspect) WaitingClients() (pulls []WaitingPull, byKind map[string]int) {
	return g.waits.List()
}

// WaitingPulls is the number of pulls (HTTP, RPC and SQS) that may wait for a
// message on this gateway now, those waiting and those being answered: what
// Config.MaxWaitingPulls bounds.
func (g *Inspect) WaitingPulls() int { return g.waits.Count() }

// clientOf is the client WithClient put in ctx (waits.ClientOf).
func clientOf(ctx context.Context) Client { return waits.ClientOf(ctx) }
