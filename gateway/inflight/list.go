package inflight

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/waits"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// The deliveries in flight, for an operator (issue 29's control room): who
// holds what, since when, for how long still. Each gateway knows only its
// own deliveries (its Table); the others are asked over NATS on
// lmq.gw.<id>.deliveries, as replies are relayed (relay.go).

// ControlPrefix starts the subjects of one gateway's control requests:
// lmq.gw.<id>.reply and lmq.gw.<id>.deliveries.
const ControlPrefix = "lmq.gw."

// DeliveryInfo describes one delivery in flight.
type DeliveryInfo struct {
	ID    string `json:"id"`
	Queue string `json:"queue"`
	// Gateway is the id of the gateway holding it (the id's first 8 hex
	// digits).
	Gateway     string       `json:"gateway"`
	Client      waits.Client `json:"client"`
	DeliveredAt time.Time    `json:"delivered_at"`
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

// info describes e, held by gateway gw, nil when it is no longer in flight.
func (e *Entry) info(gw string, now time.Time) *DeliveryInfo {
	e.mu.Lock()
	st, deadline := e.state, e.deadline
	e.mu.Unlock()
	if st == finished || !now.Before(deadline) {
		return nil
	}
	r := e.Raw
	return &DeliveryInfo{
		ID: e.ID, Queue: r.Queue().Name(), Gateway: gw, Client: e.Client,
		DeliveredAt: e.At, Deadline: deadline, Receives: r.Receives,
		RetryRemaining: r.Retry + 1 - r.Used(), Priority: r.Level, Group: r.Group, Seq: r.Seq,
	}
}

// List lists the table's deliveries of queue in flight (gw is the
// gateway's id), oldest first, at most max; truncated when there were more.
func (t *Table) List(gw, queue string, max int) (out []DeliveryInfo, truncated bool) {
	t.mu.Lock()
	es := make([]*Entry, 0, 16)
	for _, e := range t.m {
		if e.Queue() == queue {
			es = append(es, e)
		}
	}
	t.mu.Unlock()
	now := time.Now()
	out = make([]DeliveryInfo, 0, min(len(es), max))
	for _, e := range es {
		if i := e.info(gw, now); i != nil {
			out = append(out, *i)
		}
	}
	sortDeliveries(out)
	if len(out) > max {
		out, truncated = out[:max], true
	}
	return out, truncated
}

// Find describes the delivery id in flight (gw is the gateway's id), nil
// when there is none.
func (t *Table) Find(gw, id string) *DeliveryInfo {
	e := t.Get(id)
	if e == nil {
		return nil
	}
	return e.info(gw, time.Now())
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

// AskPeers adds to out the deliveries of queue held by the gateways peers
// that answer within two seconds; the others are named in out.Unanswered.
// out comes back sorted.
func AskPeers(ctx context.Context, b *bus.Bus, peers []string, queue string, out *DeliveryList) {
	if len(peers) > 0 {
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
				resp, err := b.Request(wctx, ControlPrefix+p+".deliveries", req)
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
	}
	sortDeliveries(out.Deliveries)
	slices.Sort(out.Unanswered)
	slices.Sort(out.Truncated)
}

// AskOwner asks the gateway owner for its delivery id (canonical). found
// is false when it holds no such delivery or is gone; the error wraps
// store.ErrUnavailable when it does not answer in time.
func AskOwner(ctx context.Context, b *bus.Bus, owner, id string) (_ DeliveryInfo, found bool, _ error) {
	req, _ := json.Marshal(deliveriesRequest{ID: id})
	wctx, cancel := context.WithTimeout(ctx, peerListWait)
	defer cancel()
	resp, err := b.Request(wctx, ControlPrefix+owner+".deliveries", req)
	if errors.Is(err, bus.ErrNoResponders) {
		return DeliveryInfo{}, false, nil // that gateway is gone, and its deliveries with it
	}
	if err != nil {
		if ctx.Err() != nil {
			return DeliveryInfo{}, false, ctx.Err()
		}
		return DeliveryInfo{}, false, fmt.Errorf("gateway %s: %w: %w", owner, store.ErrUnavailable, err)
	}
	var a deliveriesAnswer
	if err := json.Unmarshal(resp.Data, &a); err != nil {
		return DeliveryInfo{}, false, fmt.Errorf("gateway %s: %w: %w", owner, store.ErrUnavailable, err)
	}
	for _, d := range a.Deliveries {
		if d.ID == id {
			return d, true, nil
		}
	}
	return DeliveryInfo{}, false, nil
}

// ServeList answers another gateway's AskPeers or AskOwner from t (gw is
// this gateway's id).
func ServeList(m bus.Msg, t *Table, gw string) {
	var req deliveriesRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		_ = m.Respond([]byte(`{"deliveries":[]}`))
		return
	}
	var a deliveriesAnswer
	if req.ID != "" {
		if i := t.Find(gw, req.ID); i != nil {
			a.Deliveries = []DeliveryInfo{*i}
		}
	} else {
		a.Deliveries, a.Truncated = t.List(gw, req.Queue, MaxListedDeliveries)
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
