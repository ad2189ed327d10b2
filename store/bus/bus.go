// Package bus is the core's core-NATS traffic, part of the store seam
// (package store and its subpackages are the only core packages that talk
// to NATS): beside the queue data, the dispatcher's notifications and pull
// requests (with their answers), the gateways' control subjects (relayed
// replies, questions about deliveries, rates), the peers' heartbeats and the
// accumulator's liveness question. A *Bus is the one handle on the
// connection that the core and the daemon hold, so that nothing outside
// the seam needs a nats.go type; the connection itself is made by package
// natsconn (or embedded) and handed over with New. Msg is every message the
// core builds or receives (msg.go), the ones it stores and pulls through
// package store included, and Headers a message's headers.
//
// A Bus also opens the buckets of users that hold no Store (OpenKV); queue
// data goes through a store.Store opened on it (store.Open).
package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// Bus is a NATS connection as the core uses it: publish, request, subscribe
// with a handler, flush, and a hook for reconnects. Safe for concurrent
// use.
type Bus struct {
	nc *nats.Conn

	// reconnectMu guards hooks, the functions run after every reconnect
	// (OnReconnect), chained after the handler the connection had.
	reconnectMu sync.Mutex
	hooks       []func()
	prevCB      nats.ConnHandler
	chained     bool
}

// New returns the Bus of the connection nc; the Bus does not own nc until
// Close is called.
func New(nc *nats.Conn) *Bus { return &Bus{nc: nc} }

// NATS is the connection under b, for the seam's other packages (store,
// which sends queue data on it), for the packages that sit beside the core
// with NATS use of their own (upgrade, migrate) and for natsconn's checks;
// the core never calls it.
func (b *Bus) NATS() *nats.Conn { return b.nc }

// ErrNoResponders is a request's error when nobody subscribes to its
// subject: NATS answers at once (a gateway that is gone, a consumer that
// does not exist). errors.Is tells it apart.
var ErrNoResponders = nats.ErrNoResponders

// Handler receives the messages of a subscription, one at a time, on the
// subscription's own goroutine.
type Handler func(Msg)

// Subscription is one subscription made with Subscribe.
type Subscription struct{ sub *nats.Subscription }

// Subscribe delivers every message on subject (wildcards allowed) to h.
func (b *Bus) Subscribe(subject string, h Handler) (*Subscription, error) {
	sub, err := b.nc.Subscribe(subject, func(nm *nats.Msg) { h(msgOf(nm, b)) })
	if err != nil {
		return nil, err
	}
	return &Subscription{sub: sub}, nil
}

// Unbounded lifts the limits on messages waiting for s's handler: NATS
// would otherwise drop what exceeds them (a slow consumer), which a
// subscription that must never lose a message cannot afford.
func (s *Subscription) Unbounded() error { return s.sub.SetPendingLimits(-1, -1) }

// Unsubscribe ends s; messages already received may still be handled.
func (s *Subscription) Unsubscribe() error { return s.sub.Unsubscribe() }

// Publish sends data on subject, without waiting.
func (b *Bus) Publish(subject string, data []byte) error { return b.nc.Publish(subject, data) }

// PublishMsg sends m (its headers included), without waiting.
func (b *Bus) PublishMsg(m *Msg) error {
	nm := natsMsg(m)
	return b.nc.PublishMsg(&nm)
}

// PublishRequest sends data on subject with reply as the subject to
// answer on, without waiting.
func (b *Bus) PublishRequest(subject, reply string, data []byte) error {
	return b.nc.PublishRequest(subject, reply, data)
}

// Request sends data on subject and waits, within ctx, for the first
// answer. ErrNoResponders when nobody listens.
func (b *Bus) Request(ctx context.Context, subject string, data []byte) (Msg, error) {
	nm, err := b.nc.RequestWithContext(ctx, subject, data)
	if err != nil {
		return Msg{}, err
	}
	return msgOf(nm, b), nil
}

// NewInbox returns a new subject unique to this connection, to receive
// answers on.
func (b *Bus) NewInbox() string { return b.nc.NewInbox() }

// Flush waits until the server has processed everything sent so far
// (subscriptions included). ctx must have a deadline.
func (b *Bus) Flush(ctx context.Context) error { return b.nc.FlushWithContext(ctx) }

// OnReconnect runs f after every reconnect of the connection, after the
// handler the connection was made with (the daemon logs there) and the
// functions given before. f runs on nats.go's callback goroutine.
func (b *Bus) OnReconnect(f func()) {
	b.reconnectMu.Lock()
	defer b.reconnectMu.Unlock()
	b.hooks = append(b.hooks, f)
	if b.chained {
		return
	}
	b.chained = true
	b.prevCB = b.nc.Opts.ReconnectedCB
	b.nc.SetReconnectHandler(func(c *nats.Conn) {
		if b.prevCB != nil {
			b.prevCB(c)
		}
		b.reconnectMu.Lock()
		hooks := append([]func(){}, b.hooks...)
		b.reconnectMu.Unlock()
		for _, h := range hooks {
			h()
		}
	})
}

// ServerName is the name of the NATS server the connection is on, "" while
// it is not connected.
func (b *Bus) ServerName() string { return b.nc.ConnectedServerName() }

// MaxPayload is the largest message the server takes.
func (b *Bus) MaxPayload() int64 { return b.nc.MaxPayload() }

// Close flushes what was sent (within timeout) and closes the connection.
// A flush that fails is returned, the connection closed all the same; one
// on a connection already closed is not an error.
func (b *Bus) Close(timeout time.Duration) error {
	err := b.nc.FlushTimeout(timeout)
	b.nc.Close()
	if err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("nats flush: %w", err)
	}
	return nil
}

// OpenKV opens a bucket (kv.Open) on b's JetStream in domain (or imported
// under apiPrefix), for a user of a bucket that needs no Store.
func (b *Bus) OpenKV(ctx context.Context, domain, apiPrefix string, cfg kv.Config) (*kv.KV, error) {
	js, err := jsapi.New(b.nc, domain, apiPrefix)
	if err != nil {
		return nil, err
	}
	return kv.Open(ctx, js, cfg)
}
