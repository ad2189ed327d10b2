package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/route"
)

// The deliveries in flight (beyond LMQ): GET /queues/{name}/deliveries lists
// a queue's, on every gateway (gateway/inflight.go); GET /deliveries/{id}
// finds one by the id a client logged, whatever its queue.

// inFlight is one delivery of GET /queues/{name}/deliveries and
// GET /deliveries/{id}.
type inFlight struct {
	ID          string    `json:"id"`
	Queue       string    `json:"queue"`
	Gateway     string    `json:"gateway"`
	ClientKind  string    `json:"client_kind"`
	ClientAddr  string    `json:"client_addr,omitempty"`
	DeliveredAt time.Time `json:"delivered_at"`
	Deadline    time.Time `json:"deadline"`
	// TimeLeft is Deadline minus now (seconds), by this gateway's clock.
	TimeLeft       float64 `json:"time_left"`
	Receives       int     `json:"receives"`
	RetryRemaining int     `json:"retry_remaining"`
	Priority       int     `json:"priority"`
	Group          string  `json:"group,omitempty"`
	Seq            uint64  `json:"seq"`
}

func toInFlight(d gateway.DeliveryInfo, now time.Time) inFlight {
	return inFlight{
		ID: d.ID, Queue: d.Queue, Gateway: d.Gateway,
		ClientKind: d.Client.Kind, ClientAddr: d.Client.Addr,
		DeliveredAt: d.DeliveredAt.UTC(), Deadline: d.Deadline.UTC(),
		TimeLeft:       max(d.Deadline.Sub(now).Seconds(), 0),
		Receives:       d.Receives,
		RetryRemaining: d.RetryRemaining,
		Priority:       d.Priority,
		Group:          strings.ToValidUTF8(d.Group, "\uFFFD"),
		Seq:            d.Seq,
	}
}

// Headers of GET /queues/{name}/deliveries naming the gateways whose list
// is missing (no answer within 2 s) or cut (more than
// gateway.MaxListedDeliveries), comma-separated.
const (
	hdrUnanswered = "Lmq-Unanswered-Gateways"
	hdrTruncated  = "Lmq-Truncated-Gateways"
)

func (a *api) listDeliveries(w http.ResponseWriter, r *http.Request, queue string) error {
	l, err := a.core.Inspect.Deliveries(r.Context(), queue)
	if err != nil {
		return err
	}
	now := time.Now()
	out := make([]inFlight, 0, len(l.Deliveries))
	for _, d := range l.Deliveries {
		out = append(out, toInFlight(d, now))
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	if len(l.Unanswered) > 0 {
		w.Header().Set(hdrUnanswered, strings.Join(l.Unanswered, ","))
	}
	if len(l.Truncated) > 0 {
		w.Header().Set(hdrTruncated, strings.Join(l.Truncated, ","))
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}

// findDelivery answers GET /deliveries/{id}: the route needs admin on some
// queue; the token's scope is checked once the delivery's queue is known
// (a delivery of a queue outside it is answered as unknown, 404, so that
// the answer tells nothing of other queues).
func (a *api) findDelivery(w http.ResponseWriter, r *http.Request) error {
	id, err := url.PathUnescape(route.Var(r, "id"))
	if err != nil {
		return err
	}
	d, err := a.core.Inspect.FindDelivery(r.Context(), id)
	if err == nil && !auth.ScopeOf(r).Allows(d.Queue) {
		err = gateway.ErrNotFound
	}
	if err != nil {
		return err
	}
	b, err := json.Marshal(toInFlight(d, time.Now()))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}
