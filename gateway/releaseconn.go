package gateway

import (
	"context"

	"github.com/lmq-gateway/lmq-gateway/gateway/inflight"
)

// Deliveries bound to a connection (beyond LMQ). LMQ only gives a message
// back early when its client left while still waiting for it (Abandon); one
// that was handed over stays with its client until the queue's timeout, even
// when the client's connection is gone and nobody can ever answer it. With
// the queue property release_on_disconnect (over MessagePack-RPC) or a
// per-pull opt-in (over HTTP, X-Lmq-Release-On-Disconnect), a front end
// records on a Bound what it handed out over one connection, and releases
// what is still unanswered when that connection closes: at once and, as with
// Abandon, without counting a retry. It is opt-in because an LMQ client may
// reconnect and then answer a delivery it got on its old connection. The
// set itself is inflight.Bound.

// ReleasesOnDisconnect reports whether deliveries of queue are bound to the
// MessagePack-RPC connection that received them (its effective
// release_on_disconnect property).
func (g *Messages) ReleasesOnDisconnect(queue string) bool {
	return g.props.Effective(queue).ReleaseOnDisconnect
}

// ReleasesOnDisconnect reports whether the delivery's queue had the property
// release_on_disconnect when it was handed out: read with the timeout, it
// costs the front end nothing per delivery.
func (d *Delivery) ReleasesOnDisconnect() bool { return d.releaseOnDisconnect }

// Bound is the set of deliveries handed out over one client connection and
// not answered on it. It holds no message bodies. A Bound is safe for
// concurrent use; create it with NewBound and call Release when the
// connection closes.
type Bound struct{ b *inflight.Bound }

// NewBound returns an empty Bound of g.
func (g *Messages) NewBound() *Bound {
	return &Bound{inflight.NewBound(g.giveBack, g.log)}
}

// Add binds d to the connection. A delivery added after Release (a handler
// that finished after its connection closed) is released at once. Deliveries
// already answered (a timeout of 0) are ignored.
func (b *Bound) Add(_ context.Context, d *Delivery) {
	if d != nil && d.ref != nil {
		b.b.Add(d.ref)
	}
}

// Done forgets the delivery id: the connection's client answered it (ack or
// nack; an ext keeps it bound).
func (b *Bound) Done(id string) { b.b.Done(id) }

// Len is the number of deliveries bound (some may have been answered
// elsewhere since).
func (b *Bound) Len() int { return b.b.Len() }

// Release gives back every bound delivery still unanswered, for the close of
// the connection: each is available again at once and does not count as a
// retry. Later Adds release at once. It returns the number given back and
// stops early when ctx ends (the rest then return after their timeout).
func (b *Bound) Release(ctx context.Context) int { return b.b.Release(ctx) }

// giveBack releases d without counting a retry, if it is still unanswered
// and the gateway is not closing (then ReleaseAll or JetStream's backstop
// brings it back).
func (g *core) giveBack(d *inflight.Entry) bool {
	done := false
	g.within(func(context.Context) {
		if g.take(d) {
			g.rel.Release(d.Raw, false)
			done = true
		}
	})
	return done
}
