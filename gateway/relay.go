package gateway

import (
	"context"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/inflight"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// Replies relayed between gateways (inflight.Relay): a reply (ack, nack,
// ext) reaching a gateway that does not hold its delivery is sent to the
// holder, the gateway whose id starts the delivery id.

// relayReply sends a reply for a delivery this gateway does not hold to the
// gateway whose id starts the delivery id.
func (g *core) relayReply(ctx context.Context, queue, id string, kind ReplyKind, vis time.Duration) error {
	_, owner, ok := inflight.Owner(id)
	if !ok || owner == g.id {
		return inflight.NotFound(id)
	}
	return inflight.Relay(ctx, g.bus, owner, inflight.RelayRequest{Queue: queue, ID: id, Kind: int(kind), Vis: int64(vis)}, replyTimeout)
}

// onRelayedReply applies a reply relayed from another gateway, on a
// goroutine of its own (the subscription's serves the next relay
// meanwhile), counted, under the gateway's lifetime.
func (g *core) onRelayedReply(m bus.Msg) {
	inflight.ServeRelay(m, g.spawn, func(life context.Context, req inflight.RelayRequest) error {
		ctx, cancel := context.WithTimeout(life, replyTimeout)
		defer cancel()
		if d := g.dels.Get(req.ID); d != nil && d.Queue() == req.Queue {
			if kind := ReplyKind(req.Kind); kind != visibilityKind {
				return g.replyLocal(ctx, d, kind)
			}
			return g.visibilityLocal(ctx, d, time.Duration(req.Vis))
		}
		if g.acked.Has(req.ID) {
			return ErrAlreadyAcked
		}
		return ErrNotFound
	})
}
