package gateway

import (
	"fmt"
	"time"
)

// ErrBusy: a pull that would wait found Config.MaxWaitingPulls pulls waiting
// already. It is ErrUnavailable (nothing happened, the same pull may succeed
// soon), so HTTP answers 503 with Retry-After and RPC "unavailable", but its
// text does not blame JetStream.
var ErrBusy error = busyError{}

type busyError struct{}

func (busyError) Error() string { return "too many waiting pulls on this gateway" }
func (busyError) Unwrap() error { return ErrUnavailable }

// waitSlot takes one of the Config.MaxWaitingPulls slots for a pull that may
// wait (wait != 0; a pull with t=0 never holds a client for long and is not
// counted), and returns its release. The limit is here, in the core, so that
// it covers every front end alike (HTTP and RPC): a waiting pull costs a
// goroutine, a connection and a place in its queues' waiter lists, however it
// arrived. Beyond the limit it returns ErrBusy at once.
func (g *Gateway) waitSlot(wait time.Duration) (release func(), err error) {
	if wait == 0 {
		return func() {}, nil
	}
	n := g.waiting.Add(1)
	if limit := g.cfg.MaxWaitingPulls; limit > 0 && n > int64(limit) {
		g.waiting.Add(-1)
		return nil, fmt.Errorf("%w (limit %d); try again", ErrBusy, limit)
	}
	return func() { g.waiting.Add(-1) }, nil
}

// WaitingPulls is the number of pulls (HTTP and RPC) that may wait for a
// message on this gateway now, those waiting and those being answered: what
// Config.MaxWaitingPulls bounds.
func (g *Gateway) WaitingPulls() int { return int(g.waiting.Load()) }
