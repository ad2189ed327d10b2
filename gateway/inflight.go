package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/lmq-gateway/lmq-gateway/gateway/waits"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// The deliveries in flight, for an operator (issue 29's control room): who
// holds what, since when, for how long still. Each gateway knows only its
// own deliveries (the delivery table); the others are asked over NATS on
// lmq.gw.<id>.deliveries, as replies are relayed (relay.go).

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

// DeliveryInfo describes one delivery in flight.
type DeliveryInfo struct {
	ID    string `json:"id"`
	Queue string `json:"queue"`
	// Gateway is the id of the gateway holding it (the id's first 8 hex
	// digits).
	Gateway     string    `json:"gateway"`
	Client      Client    `json:"client"`
	DeliveredAt time.Time `json:"delivered_at"`
	// Deadline is when it times out, unless answered or extended: the time
	// left is Deadline minus now.
	Deadline time.Time `json:"deadline"`
	// Receives counts the message's deliveries, this one included.
	Receives       int    `json:"receives"`
	RetryRemaining int    `json:"retry_remaining"`
	Priority       int    `json:"priority"`
	Group          string `json:"group,omitempty"`
	Seq            uint64 `json:"seq"`
}

// DeliveryList is the deliveries in flight of a queue across the gateways.
type DeliveryList struct {
	// Deliveries, oldest delivery first.
	Deliveries []DeliveryInfo
	// Unanswered is the gateways that did not answer in time (their
	// deliveries are missing from the list).
	Unanswered []string
	// Truncated is the gateways that hold more than MaxListedDeliveries of
	// the queue's deliveries: only that many of each are listed.
	Truncated []string
}

const (
	// MaxListedDeliveries bounds the deliveries listed per gateway.
	MaxListedDeliveries = 1000
	// peerListWait bounds the wait for the other gateways' lists.
	peerListWait = 2 * time.Second
)

// info describes d, nil when it is no longer in flight.
func (g *core) info(d *delivery, now time.Time) *DeliveryInfo {
	d.mu.Lock()
	st, deadline := d.state, d.deadline
	d.mu.Unlock()
	if st == finished || !now.Before(deadline) {
		return nil
	}
	r := d.raw
	return &DeliveryInfo{
		ID: d.id, Queue: r.Queue().Name(), Gateway: g.id, Client: d.client,
		DeliveredAt: d.at, Deadline: deadline, Receives: r.Receives,
		RetryRemaining: r.Retry + 1 - r.Used(), Priority: r.Level, Group: r.Group, Seq: r.Seq,
	}
}

// localDeliveries lists this gateway's deliveries of queue in flight, oldest
// first, at most max; truncated when there were more.
func (g *core) localDeliveries(queue string, max int) (out []DeliveryInfo, truncated bool) {
	g.dels.mu.Lock()
	ds := make([]*delivery, 0, 16)
	for _, d := range g.dels.m {
		if d.raw.Queue().Name() == queue {
			ds = append(ds, d)
		}
	}
	g.dels.mu.Unlock()
	now := time.Now()
	out = make([]DeliveryInfo, 0, min(len(ds), max))
	for _, d := range ds {
		if i := g.info(d, now); i != nil {
			out = append(out, *i)
		}
	}
	sortDeliveries(out)
	if len(out) > max {
		out, truncated = out[:max], true
	}
	return out, truncated
}

func sortDeliveries(ds []DeliveryInfo) {
	slices.SortFunc(ds, func(a, b DeliveryInfo) int {
		if c := a.DeliveredAt.Compare(b.DeliveredAt); c != 0 {
			return c
		}
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
}

// deliveriesRequest asks a gateway for its deliveries of Queue, or for the
// one delivery ID.
type deliveriesRequest struct {
	Queue string `json:"queue,omitempty"`
	ID    string `json:"id,omitempty"`
}

type deliveriesAnswer struct {
	Deliveries []DeliveryInfo `json:"deliveries"`
	Truncated  bool           `json:"truncated,omitempty"`
}

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
	own, tr := g.localDeliveries(queue, MaxListedDeliveries)
	out.Deliveries = own
	if tr {
		out.Truncated = append(out.Truncated, g.id)
	}
	peers := g.peers.List()
	if len(peers) == 0 {
		return out, nil
	}
	req, _ := json.Marshal(deliveriesRequest{Queue: queue})
	wctx, cancel := context.WithTimeout(ctx, peerListWait)
	defer cancel()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := g.bus.Request(wctx, controlPrefix+p+".deliveries", req)
			var a deliveriesAnswer
			if err == nil {
				err = json.Unmarshal(resp.Data, &a)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, bus.ErrNoResponders):
				// Gone (its deliveries with it), or an older version.
			case err != nil:
				out.Unanswered = append(out.Unanswered, p)
			default:
				if len(a.Deliveries) > MaxListedDeliveries {
					a.Deliveries, a.Truncated = a.Deliveries[:MaxListedDeliveries], true
				}
				for _, d := range a.Deliveries {
					if d.Queue == queue {
						out.Deliveries = append(out.Deliveries, d)
					}
				}
				if a.Truncated {
					out.Truncated = append(out.Truncated, p)
				}
			}
		}()
	}
	wg.Wait()
	sortDeliveries(out.Deliveries)
	slices.Sort(out.Unanswered)
	slices.Sort(out.Truncated)
	return out, nil
}

// FindDelivery describes the delivery in flight whose id is id, whatever
// its queue, asking the gateway holding it (the one whose id starts it).
// ErrNotFound when no such delivery is in flight; ErrUnavailable when its
// gateway does not answer in time.
func (g *Inspect) FindDelivery(ctx context.Context, id string) (DeliveryInfo, error) {
	notFound := fmt.Errorf("delivery %s: %w", id, ErrNotFound)
	u, err := uuid.Parse(id)
	if err != nil {
		return DeliveryInfo{}, notFound
	}
	id = u.String() // canonical, as the table's keys
	owner := fmt.Sprintf("%x", u[:4])
	if owner == g.id {
		if i := g.findLocal(id); i != nil {
			return *i, nil
		}
		return DeliveryInfo{}, notFound
	}
	req, _ := json.Marshal(deliveriesRequest{ID: id})
	wctx, cancel := context.WithTimeout(ctx, peerListWait)
	defer cancel()
	resp, err := g.bus.Request(wctx, controlPrefix+owner+".deliveries", req)
	if errors.Is(err, bus.ErrNoResponders) {
		return DeliveryInfo{}, notFound // that gateway is gone, and its deliveries with it
	}
	if err != nil {
		if ctx.Err() != nil {
			return DeliveryInfo{}, ctx.Err()
		}
		return DeliveryInfo{}, fmt.Errorf("gateway %s: %w: %w", owner, ErrUnavailable, err)
	}
	var a deliveriesAnswer
	if err := json.Unmarshal(resp.Data, &a); err != nil {
		return DeliveryInfo{}, fmt.Errorf("gateway %s: %w: %w", owner, ErrUnavailable, err)
	}
	for _, d := range a.Deliveries {
		if d.ID == id {
			return d, nil
		}
	}
	return DeliveryInfo{}, notFound
}

func (g *core) findLocal(id string) *DeliveryInfo {
	d := g.dels.get(id)
	if d == nil {
		return nil
	}
	return g.info(d, time.Now())
}

// onDeliveriesRequest answers another gateway's Deliveries or FindDelivery.
func (g *core) onDeliveriesRequest(m bus.Msg) {
	var req deliveriesRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		_ = m.Respond([]byte(`{"deliveries":[]}`))
		return
	}
	var a deliveriesAnswer
	if req.ID != "" {
		if i := g.findLocal(req.ID); i != nil {
			a.Deliveries = []DeliveryInfo{*i}
		}
	} else {
		a.Deliveries, a.Truncated = g.localDeliveries(req.Queue, MaxListedDeliveries)
	}
	if a.Deliveries == nil {
		a.Deliveries = []DeliveryInfo{}
	}
	b, err := json.Marshal(a)
	if err != nil {
		b = []byte(`{"deliveries":[]}`)
	}
	_ = m.Respond(b)
}
