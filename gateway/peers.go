package gateway

import (
	"encoding/hex"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// Peers: which other gateways share this NATS system, so that a gateway
// running alone publishes no wake-up notifications (issue 19). A
// notification exists only for other gateways' waiting clients: this
// gateway wakes its own directly (notifyLevel). Alone, every push and
// release paid for a publish that came straight back to its own
// subscription, to be read, handed to a goroutine and dropped.
//
// Gateways find each other by heartbeats on core NATS (nothing stored):
//   - at start (and after a reconnect), a hello on lmq.gw.hello with a
//     reply subject; every gateway that hears it answers there at once, so
//     the newcomer knows the others within a round trip, and they know it;
//   - a hello every helloEvery; a gateway not heard from for peerLapse
//     (three missed hellos: it died, or its network did) is dropped;
//   - a bye when it stops waiting (StopWaiting, at the start of a graceful
//     shutdown), so the others stop notifying it at once;
//   - a gateway that sends notifications is a peer too (older versions send
//     no hellos): its notifications keep it alive.
//
// Why skipping is safe with several gateways: a notification only shortens
// a waiting pull's sleep. A gateway that has not yet heard of another (the
// first moments of a start, a hello lost while a cluster propagates
// interest, a peer of an older version that has not pushed yet) leaves that
// peer's waiting clients to its re-poll (RepollInterval, 2 s by default),
// which also catches messages published by plain NATS programs. Nothing is
// lost or reordered, and no delivery is taken; only that wake-up is later.
type peers struct {
	g     *Gateway
	hello []byte // 'H' + this gateway's id prefix
	bye   []byte // 'B' + id prefix
	now   func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time // peer id prefix (raw bytes) → last heard
	// some is whether seen holds anyone: read on every push (notifyLevel),
	// so it is kept apart from the map and its lock.
	some atomic.Bool
}

const (
	helloSubject = controlPrefix + "hello"
	helloEvery   = 5 * time.Second
	peerLapse    = 3 * helloEvery
)

func newPeers(g *Gateway) *peers {
	return &peers{
		g:     g,
		hello: append([]byte{'H'}, g.idPfx...),
		bye:   append([]byte{'B'}, g.idPfx...),
		now:   time.Now,
		seen:  make(map[string]time.Time),
	}
}

// any reports whether another gateway may have waiting clients.
func (p *peers) any() bool { return p.some.Load() }

// start subscribes to hellos and announces this gateway, asking the others
// to answer at once.
func (p *peers) start() error {
	g := p.g
	sub, err := g.nc.Subscribe(helloSubject, g.counted(p.onHello))
	if err != nil {
		return err
	}
	g.subs = append(g.subs, sub)
	if sub, err = g.nc.Subscribe(controlPrefix+g.id+".hello", g.counted(p.onHello)); err != nil {
		return err
	}
	g.subs = append(g.subs, sub)
	return p.announce()
}

// announce sends a hello that every other gateway answers at once: at start,
// and after a reconnect (others may have dropped this gateway meanwhile, and
// it them).
func (p *peers) announce() error {
	g := p.g
	return g.nc.PublishMsg(&nats.Msg{Subject: helloSubject, Reply: controlPrefix + g.id + ".hello", Data: p.hello})
}

// run sends the periodic hello and drops peers gone silent, until the
// gateway stops waiting; then it says bye.
func (p *peers) run() {
	g := p.g
	defer g.bg.Done()
	t := time.NewTicker(helloEvery)
	defer t.Stop()
	for {
		select {
		case <-g.closing:
			_ = g.nc.Publish(helloSubject, p.bye)
			return
		case <-t.C:
			_ = g.nc.Publish(helloSubject, p.hello)
			p.prune()
		}
	}
}

func (p *peers) onHello(m *nats.Msg) {
	if len(m.Data) != 1+len(p.g.idPfx) {
		return // not a hello of this version: ignored
	}
	id := m.Data[1:]
	if string(id) == string(p.g.idPfx) {
		return // our own
	}
	switch m.Data[0] {
	case 'H':
		p.heard(id)
		if m.Reply != "" {
			_ = p.g.nc.Publish(m.Reply, p.hello)
		}
	case 'B':
		p.mu.Lock()
		delete(p.seen, string(id))
		p.some.Store(len(p.seen) > 0)
		p.mu.Unlock()
	}
}

// heard notes a sign of life from the gateway with this id prefix.
func (p *peers) heard(id []byte) {
	now := p.now()
	p.mu.Lock()
	p.seen[string(id)] = now
	p.some.Store(true)
	p.mu.Unlock()
}

// prune forgets peers not heard from for peerLapse.
func (p *peers) prune() {
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

// list is the ids (hex) of the peers known now, sorted.
func (p *peers) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.seen))
	for id := range p.seen {
		out = append(out, hex.EncodeToString([]byte(id)))
	}
	slices.Sort(out)
	return out
}

// Peers is the ids of the other gateways this one knows to share its NATS
// system (their hellos, or their notifications, were heard within the last
// 15 s).
func (g *Gateway) Peers() []string { return g.peers.list() }
