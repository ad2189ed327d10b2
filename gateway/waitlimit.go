package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
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
	n := g.waiting.Add(1)
	if limit := g.cfg.MaxWaitingPulls; limit > 0 && n > int64(limit) {
		g.waiting.Add(-1)
		return nil, fmt.Errorf("%w (limit %d); try again", ErrBusy, limit)
	}
	id := g.pulls.add(WaitingPull{Client: clientOf(ctx), Waits: what, Since: time.Now()})
	return func() {
		g.pulls.remove(id)
		g.waiting.Add(-1)
	}, nil
}

// WaitingPull is a pull waiting for a message now.
type WaitingPull struct {
	Client Client `json:"client"`
	// Waits is the queue it waits on, or "pull-any: <regexp>".
	Waits string    `json:"waits"`
	Since time.Time `json:"since"`
}

// MaxListedPulls bounds the pulls WaitingClients lists (the counts cover
// them all).
const MaxListedPulls = 1000

// waitingPulls is the pulls holding a waitSlot: a map under a mutex, as
// bounded as they are (Config.MaxWaitingPulls).
type waitingPulls struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]WaitingPull
}

func (w *waitingPulls) add(p WaitingPull) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[uint64]WaitingPull{}
	}
	w.next++
	w.m[w.next] = p
	return w.next
}

func (w *waitingPulls) remove(id uint64) {
	w.mu.Lock()
	delete(w.m, id)
	w.mu.Unlock()
}

// WaitingClients lists the pulls waiting on this gateway now, longest
// waiting first, at most MaxListedPulls of them, and counts them all by
// client kind.
func (g *Inspect) WaitingClients() (pulls []WaitingPull, byKind map[string]int) {
	g.pulls.mu.Lock()
	pulls = make([]WaitingPull, 0, len(g.pulls.m))
	for _, p := range g.pulls.m {
		pulls = append(pulls, p)
	}
	g.pulls.mu.Unlock()
	byKind = map[string]int{}
	for _, p := range pulls {
		byKind[p.Client.Kind]++
	}
	slices.SortFunc(pulls, func(a, b WaitingPull) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return strings.Compare(a.Client.Addr, b.Client.Addr)
	})
	if len(pulls) > MaxListedPulls {
		pulls = pulls[:MaxListedPulls]
	}
	return pulls, byKind
}

// WaitingPulls is the number of pulls (HTTP, RPC and SQS) that may wait for a
// message on this gateway now, those waiting and those being answered: what
// Config.MaxWaitingPulls bounds.
func (g *Inspect) WaitingPulls() int { return int(g.waiting.Load()) }
