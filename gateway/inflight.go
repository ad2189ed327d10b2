package gateway

import (
	"context"
	"fmt"

	"github.com/lmq-gateway/lmq-gateway/gateway/inflight"
	"github.com/lmq-gateway/lmq-gateway/gateway/waits"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// The deliveries in flight, for an operator (issue 29's control room), are
// package inflight's (gateway/inflight): the table, the listing and the
// questions to the other gateways. These are the core's calls into it.

// Client kinds: the front end a delivery was handed out through
// (package waits).
const (
	ClientHTTP = waits.ClientHTTP
	ClientRPC  = waits.ClientRPC
	ClientSQS  = waits.ClientSQS
	ClientGo   = waits.ClientGo
)

// Client is who a delivery was handed to (waits.Client).
type Client = waits.Client

// WithClient is ctx for a pull on behalf of a client of that kind (ClientHTTP,
// ClientRPC, ClientSQS) at addr: the deliveries it gets record them
// (Deliveries, FindDelivery), and so does the list of waiting pulls.
func WithClient(ctx context.Context, kind, addr string) context.Context {
	return waits.WithClient(ctx, kind, addr)
}

// DeliveryInfo describes one delivery in flight (inflight.DeliveryInfo).
type DeliveryInfo = inflight.DeliveryInfo

// DeliveryList is the deliveries in flight of a queue across the gateways
// (inflight.DeliveryList).
type DeliveryList = inflight.DeliveryList

// MaxListedDeliveries bounds the deliveries listed per gateway.
const MaxListedDeliveries = inflight.MaxListedDeliveries

// InFlight is the number of this gateway's deliveries not yet answered.
func (g *Inspect) InFlight() int { return g.dels.Len() }

// InFlightByQueue is the number of this gateway's deliveries not yet
// answered, per queue (queues with none are absent).
func (g *Inspect) InFlightByQueue() map[string]int { return g.dels.ByQueue() }

// Deliveries lists the queue's deliveries in flight on every gateway: this
// one's, and those of the others (Peers) that answer within two seconds; the
// others are named in Unanswered. ErrNotFound when the queue does not exist.
func (g *Inspect) Deliveries(ctx context.Context, queue string) (DeliveryList, error) {
	if err := validName(queue); err != nil {
		return DeliveryList{}, err
	}
	if ok, err := g.reg.Exists(ctx, queue); err != nil {
		return DeliveryList{}, err
	} else if !ok {
		return DeliveryList{}, fmt.Errorf("queue %q: %w", queue, ErrNotFound)
	}
	var out DeliveryList
	own, tr := g.dels.List(g.id, queue, MaxListedDeliveries)
	out.Deliveries = own
	if tr {
		out.Truncated = append(out.Truncated, g.id)
	}
	inflight.AskPeers(ctx, g.bus, g.peers.List(), queue, &out)
	return out, nil
}

// FindDelivery describes the delivery in flight whose id is id, whatever
// its queue, asking the gateway holding it (the one whose id starts it).
// ErrNotFound when no such delivery is in flight; ErrUnavailable when its
// gateway does not answer in time.
func (g *Inspect) FindDelivery(ctx context.Context, id string) (DeliveryInfo, error) {
	cid, owner, ok := inflight.Owner(id)
	if !ok {
		return DeliveryInfo{}, inflight.NotFound(id)
	}
	if owner == g.id {
		if i := g.dels.Find(g.id, cid); i != nil {
			return *i, nil
		}
		return DeliveryInfo{}, inflight.NotFound(id)
	}
	d, found, err := inflight.AskOwner(ctx, g.bus, owner, cid)
	if err == nil && !found {
		err = inflight.NotFound(id)
	}
	return d, err
}

// onDeliveriesRequest answers another gateway's Deliveries or FindDelivery.
func (g *core) onDeliveriesRequest(m bus.Msg) { inflight.ServeList(m, g.dels, g.id) }
