package inflight

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// Replies relayed between gateways: a delivery id starts with the id of the
// gateway holding the delivery, and a reply (ack, nack, ext) reaching another
// gateway is sent to the holder over NATS (lmq.gw.<id>.reply), which applies
// it and answers with one word.

// ErrAlreadyAcked: a reply to a delivery that this gateway saw acked
// (recently). It wraps store.ErrNotFound (gateway.ErrAlreadyAcked).
var ErrAlreadyAcked = fmt.Errorf("already acknowledged: %w", store.ErrNotFound)

// RelayRequest is a reply relayed to the gateway holding the delivery.
type RelayRequest struct {
	Queue string `json:"queue"`
	ID    string `json:"id"`
	Kind  int    `json:"kind"`
	// Vis is SetVisibility's time left (nanoseconds), with its kind.
	Vis int64 `json:"vis,omitempty"`
}

// Relay sends req to the gateway owner and returns its outcome: nil when
// applied, store.ErrNotFound (wrapped) when the owner holds no such
// delivery or is gone, ErrAlreadyAcked, or store.ErrUnknown when the
// outcome is not known. The owner bounds its own work by within; the wait
// is a second more, for the round trip.
func Relay(ctx context.Context, b *bus.Bus, owner string, req RelayRequest, within time.Duration) error {
	data, _ := json.Marshal(req)
	rctx, cancel := context.WithTimeout(ctx, within+time.Second)
	defer cancel()
	resp, err := b.Request(rctx, ControlPrefix+owner+".reply", data)
	if errors.Is(err, bus.ErrNoResponders) {
		return NotFound(req.ID) // that gateway is gone, and its deliveries with it
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("relay reply: %w", ctx.Err())
		}
		// The owner may have applied the reply and died (or lost NATS)
		// before answering.
		return fmt.Errorf("relay reply: %w: %w", store.ErrUnknown, err)
	}
	switch a := string(resp.Data); {
	case a == "ok":
		return nil
	case a == "not_found":
		return NotFound(req.ID)
	case a == "acked":
		return fmt.Errorf("delivery %s: %w", req.ID, ErrAlreadyAcked)
	case strings.HasPrefix(a, "unknown: "):
		return fmt.Errorf("relay reply: %w: %s", store.ErrUnknown, strings.TrimPrefix(a, "unknown: "))
	}
	return fmt.Errorf("relay reply: %w: %s", store.ErrUnavailable, resp.Data)
}

// NotFound is the error of a reply to the unknown delivery id.
func NotFound(id string) error { return fmt.Errorf("delivery %s: %w", id, store.ErrNotFound) }

// ServeRelay answers a relayed reply: apply runs it on a goroutine of its
// own, which spawn starts (false: not started, the gateway is closing, and
// the relaying gateway hears so); its error is answered in one word.
func ServeRelay(m bus.Msg, spawn func(func(context.Context)) bool, apply func(context.Context, RelayRequest) error) {
	var req RelayRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		_ = m.Respond([]byte("bad request"))
		return
	}
	started := spawn(func(life context.Context) {
		switch err := apply(life, req); {
		case err == nil:
			_ = m.Respond([]byte("ok"))
		case errors.Is(err, ErrAlreadyAcked):
			_ = m.Respond([]byte("acked"))
		case errors.Is(err, store.ErrNotFound):
			_ = m.Respond([]byte("not_found"))
		case errors.Is(err, store.ErrUnknown):
			_ = m.Respond([]byte("unknown: " + err.Error()))
		default:
			_ = m.Respond([]byte(err.Error()))
		}
	})
	if !started {
		_ = m.Respond([]byte("gateway closing"))
	}
}
