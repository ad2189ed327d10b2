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
//   - a bye when it stops waiting (the channel given to New: the core's
//     StopWaiting, at the start of a graceful shutdown), or at Stop, so the
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
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/testsignal"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// Peers is this gateway's view of the others. Create it with New; Start
// and Stop it (lifecycle.Service).
type Peers struct {
	bus   *bus.Bus
	wrap  func(bus.Handler) bus.Handler
	bye   <-chan struct{} // closed when the gateway stops waiting: say bye
	id    []byte          // this gateway's id (raw bytes)
	reply string          // where the others answer this gateway's hello
	hello []byte          // 'H' + id
	byeM  []byte          // 'B' + id
	now   func() time.Time

	// Set by Start, ended by Stop.
	subs []*bus.Subscription
	stop chan struct{}
	done chan struct{}

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
// delivery ids start with) on bus. wrap wraps the subscriptions' handler
// (the owner counts them as its work); bye, when closed, has the gateway
// say bye (it stops waiting) before Stop. Nothing happens until Start.
func New(bus *bus.Bus, id []byte, wrap func(bus.Handler) bus.Handler, bye <-chan struct{}) *Peers {
	return &Peers{
		bus:   bus,
		wrap:  wrap,
		bye:   bye,
		id:    id,
		reply: "lmq.gw." + hex.EncodeToString(id) + ".hello",
		hello: append([]byte{'H'}, id...),
		byeM:  append([]byte{'B'}, id...),
		now:   time.Now,
		seen:  make(map[string]time.Time),
	}
}

// Any reports whether another gateway may have waiting clients.
func (p *Peers) Any() bool { return p.some.Load() }

// Start subscribes to hellos, announces this gateway, asking the others
// to answer at once, and sends the periodic hello on a goroutine of its own
// until Stop (lifecycle.Service). On failure nothing is left subscribed.
func (p *Peers) Start(context.Context) error {
	for _, subj := range []string{helloSubject, p.reply} {
		sub, err := p.bus.Subscribe(subj, p.wrap(p.onHello))
		if err != nil {
			p.unsubscribe()
			return fmt.Errorf("peers: %w", err)
		}
		p.subs = append(p.subs, sub)
	}
	if err := p.Announce(); err != nil {
		p.unsubscribe()
		return fmt.Errorf("peers: %w", err)
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.run()
	return nil
}

// Stop says bye (unless the gateway stopped waiting already and said it),
// ends the periodic hello and waits for it, and unsubscribes
// (lifecycle.Service).
func (p *Peers) Stop() {
	if p.stop != nil {
		close(p.stop)
		<-p.done
	}
	p.unsubscribe()
}

func (p *Peers) unsubscribe() {
	for _, s := range p.subs {
		_ = s.Unsubscribe()
	}
	p.subs = nil
}

// Announce sends a hello that every other gateway answers at once: at
// start, and after a reconnect (others may have dropped this gateway
// meanwhile, and it them).
func (p *Peers) Announce() error {
	return p.bus.PublishRequest(helloSubject, p.reply, p.hello)
}

// run sends the periodic hello and drops peers gone silent, until the
// gateway stops waiting or Stop; then it says bye.
func (p *Peers) run() {
	defer close(p.done)
	t := time.NewTicker(helloEvery)
	defer t.Stop()
	for {
		select {
		case <-p.bye:
			_ = p.bus.Publish(helloSubject, p.byeM)
			return
		case <-p.stop:
			_ = p.bus.Publish(helloSubject, p.byeM)
			return
		case <-t.C:
			_ = p.bus.Publish(helloSubject, p.hello)
			p.prune()
		}
	}
}

func (p *Peers) onHello(m bus.Msg) {
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
			_ = p.bus.Publish(m.Reply, p.hello)
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
