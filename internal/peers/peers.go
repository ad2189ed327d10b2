// Package peers finds the other gateways that share this NATS system, so
// that a gateway running alone publishes no wake-up notifications (issue 19). A
// notification exists only for other gateways' waiting clients: this
// gateway wakes its own directly (the core's notifyLevel). Alone, every push and
// release paid for a publish that came straight back to its own
// subscription, to be read, handed to a goroutine and dropped.
//
// Gateways find each other by heartbeats on core NATS (nothing stored):
//   - at start (and after a reconnect), a hello on lmq.gw.hello with a
//     reply subject; every gateway that hears it answers there at once, so
//     the newcomer knows the others within a round trip, and they know it;
//   - a hello every helloEvery; a gateway not heard from for peerLapse
//     (three missed hellos: it died, or its network did) is dropped;
//   - a bye when it stops waiting (the stop channel given to Run: the
//     core's StopWaiting, at the start of a graceful shutdown), so the
//     others stop notifying it at once;
//   - a gateway that sends notifications is a peer too (older versions send
//     no hellos): its notifications keep it alive (Heard).
//
// Why skipping is safe with several gateways: a notification only shortens
// a waiting pull's sleep. A gateway that has not yet heard of another (the
// first moments of a start, a hello lost while a cluster propagates
// interest, a peer of an older version that has not pushed yet) leaves that
// peer's waiting clients to its re-poll (RepollInterval, 2 s by default),
// which also catches messages published by plain NATS programs. Nothing is
// lost or reordered, and no delivery is taken; only that wake-up is later.
package peers

import (
	"encoding/hex"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/internal/testsignal"
)

// Peers is this gateway's view of the others. Create it with New, then
// Start it and Run it on a goroutine its owner waits for.
type Peers struct {
	nc    *nats.Conn
	id    []byte // this gateway's id (raw bytes)
	reply string // where the others answer this gateway's hello
	hello []byte // 'H' + id
	bye   []byte // 'B' + id
	now   func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time // peer id prefix (raw bytes) → last heard
	// some is whether seen holds anyone: read on every push (notifyLevel),
	// so it is kept apart from the map and its lock.
	some atomic.Bool

	// TestHeard reports each hello ('H') or bye ('B') of another gateway
	// once applied, to a test that turned it on (internal/testsignal);
	// off otherwise.
	TestHeard testsignal.Signal[byte]
}

// The hellos are on the gateways' control subjects (lmq.gw., the core's
// controlPrefix).
const (
	helloSubject = "lmq.gw.hello"
	helloEvery   = 5 * time.Second
	peerLapse    = 3 * helloEvery
)

// New returns the peers of the gateway with this id (the raw bytes its
// delivery ids start with) on nc.
func New(nc *nats.Conn, id []byte) *Peers {
	return &Peers{
		nc:    nc,
		id:    id,
		reply: "lmq.gw." + hex.EncodeToString(id) + ".hello",
		hello: append([]byte{'H'}, id...),
		bye:   append([]byte{'B'}, id...),
		now:   time.Now,
		seen:  make(map[string]time.Time),
	}
}

// Any reports whether another gateway may have waiting clients.
func (p *Peers) Any() bool { return p.some.Load() }

// Start subscribes to hellos and announces this gateway, asking the others
// to answer at once. wrap wraps the subscriptions' handler (the owner counts
// them as its work); the subscriptions made are returned, on failure too,
// for the owner to end.
func (p *Peers) Start(wrap func(nats.MsgHandler) nats.MsgHandler) ([]*nats.Subscription, error) {
	var subs []*nats.Subscription
	for _, subj := range []string{helloSubject, p.reply} {
		sub, err := p.nc.Subscribe(subj, wrap(p.onHello))
		if err != nil {
			return subs, err
		}
		subs = append(subs, sub)
	}
	return subs, p.Announce()
}

// Announce sends a hello that every other gateway answers at once: at
// start, and after a reconnect (others may have dropped this gateway
// meanwhile, and it them).
func (p *Peers) Announce() error {
	return p.nc.PublishMsg(&nats.Msg{Subject: helloSubject, Reply: p.reply, Data: p.hello})
}

// Run sends the periodic hello and drops peers gone silent, until stop is
// closed (the gateway stops waiting); then it says bye.
func (p *Peers) Run(stop <-chan struct{}) {
	t := time.NewTicker(helloEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			_ = p.nc.Publish(helloSubject, p.bye)
			return
		case <-t.C:
			_ = p.nc.Publish(helloSubject, p.hello)
			p.prune()
		}
	}
}

func (p *Peers) onHello(m *nats.Msg) {
	if len(m.Data) != 1+len(p.id) {
		return // not a hello of this version: ignored
	}
	id := m.Data[1:]
	if string(id) == string(p.id) {
		return // our own
	}
	switch m.Data[0] {
	case 'H':
		p.Heard(id)
		if m.Reply != "" {
			_ = p.nc.Publish(m.Reply, p.hello)
		}
	case 'B':
		p.mu.Lock()
		delete(p.seen, string(id))
		p.some.Store(len(p.seen) > 0)
		p.mu.Unlock()
	}
	p.TestHeard.Signal(m.Data[0])
}

// Heard notes a sign of life from the gateway with this id: a hello, or a
// notification it sent.
func (p *Peers) Heard(id []byte) {
	now := p.now()
	p.mu.Lock()
	p.seen[string(id)] = now
	p.some.Store(true)
	p.mu.Unlock()
}

// prune forgets peers not heard from for peerLapse.
func (p *Peers) prune() {
	cut := p.now().Add(-peerLapse)
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, at := range p.seen {
		if at.Before(cut) {
			delete(p.seen, id)
		}
	}
	p.some.Store(len(p.seen) > 0)
}

// List is the ids (hex) of the peers known now, sorted.
func (p *Peers) List() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.seen))
	for id := range p.seen {
		out = append(out, hex.EncodeToString([]byte(id)))
	}
	slices.Sort(out)
	return out
}
