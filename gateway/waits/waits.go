// Package waits bounds and lists the pulls that wait for a message on
// this gateway (Limiter): Config.MaxWaitingPulls of package gateway, and
// the console's Clients page. It also holds who a pull or a delivery is
// for (Client, WithClient), which the core records with each delivery.
package waits

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Client kinds: the front end a delivery was handed out through.
const (
	ClientHTTP = "http"
	ClientRPC  = "rpc"
	ClientSQS  = "sqs"
	ClientGo   = "go" // the Go API (package lmq), and any caller without WithClient
)

// Client is who a delivery was handed to: the front end's kind and the
// client's remote address ("" when unknown).
type Client struct {
	Kind string `json:"kind"`
	Addr string `json:"addr,omitempty"`
}

type clientKey struct{}

// WithClient is ctx for a pull on behalf of a client of that kind (ClientHTTP,
// ClientRPC, ClientSQS) at addr: the deliveries it gets record them
// (the core's Deliveries, FindDelivery), and so does the list of waiting
// pulls (Limiter.List).
func WithClient(ctx context.Context, kind, addr string) context.Context {
	return context.WithValue(ctx, clientKey{}, Client{Kind: kind, Addr: addr})
}

// ClientOf is the client WithClient put in ctx; ClientGo when none.
func ClientOf(ctx context.Context) Client {
	if c, ok := ctx.Value(clientKey{}).(Client); ok {
		return c
	}
	return Client{Kind: ClientGo}
}

// Pull is a pull waiting for a message now.
type Pull struct {
	Client Client `json:"client"`
	// Waits is the queue it waits on, or "pull-any: <regexp>".
	Waits string    `json:"waits"`
	Since time.Time `json:"since"`
}

// MaxListed bounds the pulls List lists (the counts cover them all).
const MaxListed = 1000

// Limiter bounds the pulls that may wait at once, and lists them. The
// limit is in the core, so that it covers every front end alike (HTTP, RPC
// and SQS): a waiting pull costs a goroutine, a connection and a place in
// its queues' waiter lists, however it arrived. Create it with New; it is
// safe for concurrent use.
type Limiter struct {
	max     int
	waiting atomic.Int64 // pulls holding a slot (Take)
	pulls   pullSet      // who they are
}

// New returns a Limiter of max pulls at once (0: no bound).
func New(max int) *Limiter { return &Limiter{max: max} }

// Take takes one of the slots for p, a pull that may wait, and returns
// its release; false beyond the limit (nothing taken).
func (l *Limiter) Take(p Pull) (release func(), ok bool) {
	n := l.waiting.Add(1)
	if l.max > 0 && n > int64(l.max) {
		l.waiting.Add(-1)
		return nil, false
	}
	id := l.pulls.add(p)
	return func() {
		l.pulls.remove(id)
		l.waiting.Add(-1)
	}, true
}

// Count is the number of pulls holding a slot now, those waiting and those
// being answered: what the limit bounds.
func (l *Limiter) Count() int { return int(l.waiting.Load()) }

// pullSet is the pulls holding a slot: a map under a mutex, as bounded as
// they are.
type pullSet struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]Pull
}

func (w *pullSet) add(p Pull) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[uint64]Pull{}
	}
	w.next++
	w.m[w.next] = p
	return w.next
}

func (w *pullSet) remove(id uint64) {
	w.mu.Lock()
	delete(w.m, id)
	w.mu.Unlock()
}

// List lists the pulls waiting now, longest waiting first, at most
// MaxListed of them, and counts them all by client kind.
func (l *Limiter) List() (pulls []Pull, byKind map[string]int) {
	l.pulls.mu.Lock()
	pulls = make([]Pull, 0, len(l.pulls.m))
	for _, p := range l.pulls.m {
		pulls = append(pulls, p)
	}
	l.pulls.mu.Unlock()
	byKind = map[string]int{}
	for _, p := range pulls {
		byKind[p.Client.Kind]++
	}
	slices.SortFunc(pulls, func(a, b Pull) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return strings.Compare(a.Client.Addr, b.Client.Addr)
	})
	if len(pulls) > MaxListed {
		pulls = pulls[:MaxListed]
	}
	return pulls, byKind
}
