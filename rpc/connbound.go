package rpc

import (
	"context"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// Deliveries bound to the connection (the queue property
// release_on_disconnect): a delivery of such a queue that this connection's
// client has not acked or nacked when the connection closes is given back at
// once, without counting a retry, instead of after the queue's timeout. A
// connection that never gets one of those deliveries pays nothing: its Bound
// is made on the first.

// releaseTimeout bounds the release of a closed connection's deliveries;
// those not released by then return after their timeout as usual.
const releaseTimeout = 10 * time.Second

// bind records d, written to the client, if its queue binds deliveries.
func (c *conn) bind(d *gateway.Delivery) {
	if !d.ReleasesOnDisconnect() {
		return
	}
	b, ok := c.s.core.Messages.(binder)
	if !ok {
		return
	}
	c.boundMu.Lock()
	if c.bound == nil {
		c.bound = b.NewBound()
	}
	bound := c.bound
	c.boundMu.Unlock()
	bound.Add(c.ctx, d)
}

// unbind forgets a delivery the client answered on this connection.
func (c *conn) unbind(id string) {
	c.boundMu.Lock()
	bound := c.bound
	c.boundMu.Unlock()
	if bound != nil {
		bound.Done(id)
	}
}

// releaseBound gives back the unanswered bound deliveries; the connection is
// closed and every handler has finished.
func (c *conn) releaseBound() {
	c.boundMu.Lock()
	bound := c.bound
	c.boundMu.Unlock()
	if bound == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if n := bound.Release(ctx); n > 0 {
		c.log.Debug("rpc connection closed with deliveries unanswered; released", "count", n)
	}
}
