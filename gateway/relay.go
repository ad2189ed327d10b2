package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// Replies relayed between gateways: a delivery id starts with the id of the
// gateway holding the delivery, and a reply (ack, nack, ext) reaching another
// gateway is sent to the holder over NATS (lmq.gw.<id>.reply), which applies
// it and answers with one word.

type relayRequest struct {
	Queue string `json:"queue"`
	ID    string `json:"id"`
	Kind  int    `json:"kind"`
	// Vis is SetVisibility's time left (nanoseconds), with kind
	// visibilityKind.
	Vis int64 `json:"vis,omitempty"`
}

func marshalRelay(queue, id string, kind ReplyKind, vis time.Duration) []byte {
	b, _ := json.Marshal(relayRequest{Queue: queue, ID: id, Kind: int(kind), Vis: int64(vis)})
	return b
}

// relayReply sends a reply for a delivery this gateway does not hold to the
// gateway whose id starts the delivery id.
func (g *core) relayReply(ctx context.Context, queue, id string, kind ReplyKind, vis time.Duration) error {
	notFound := fmt.Errorf("delivery %s: %w", id, ErrNotFound)
	u, err := uuid.Parse(id)
	if err != nil {
		return notFound
	}
	owner := fmt.Sprintf("%x", u[:4])
	if owner == g.id {
		return notFound
	}
	// The owner bounds its own work by replyTimeout and then answers; the
	// extra second is for the round trip.
	rctx, cancel := context.WithTimeout(ctx, replyTimeout+time.Second)
	defer cancel()
	resp, err := g.bus.Request(rctx, controlPrefix+owner+".reply", marshalRelay(queue, id, kind, vis))
	if errors.Is(err, bus.ErrNoResponders) {
		return notFound // that gateway is gone, and its deliveries with it
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("relay reply: %w", ctx.Err())
		}
		// The owner may have applied the reply and died (or lost NATS)
		// before answering.
		return fmt.Errorf("relay reply: %w: %w", ErrUnknown, err)
	}
	switch a := string(resp.Data); {
	case a == "ok":
		return nil
	case a == "not_found":
		return notFound
	case a == "acked":
		return fmt.Errorf("delivery %s: %w", id, ErrAlreadyAcked)
	case strings.HasPrefix(a, "unknown: "):
		return fmt.Errorf("relay reply: %w: %s", ErrUnknown, strings.TrimPrefix(a, "unknown: "))
	}
	return fmt.Errorf("relay reply: %w: %s", ErrUnavailable, resp.Data)
}

func (g *core) onRelayedReply(m bus.Msg) {
	var req relayRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		_ = m.Respond([]byte("bad request"))
		return
	}
	// On a goroutine of its own (the subscription's serves the next relay
	// meanwhile), counted, under the gateway's lifetime. Once the gateway is
	// closing it is not started and the relaying gateway hears so.
	started := g.spawn(func(life context.Context) {
		ctx, cancel := context.WithTimeout(life, replyTimeout)
		defer cancel()
		err := ErrNotFound
		if d := g.dels.get(req.ID); d != nil && d.raw.Queue().Name() == req.Queue {
			if kind := ReplyKind(req.Kind); kind == visibilityKind {
				err = g.visibilityLocal(ctx, d, time.Duration(req.Vis))
			} else {
				err = g.replyLocal(ctx, d, kind)
			}
		} else if g.acked.Has(req.ID) {
			err = ErrAlreadyAcked
		}
		switch {
		case err == nil:
			_ = m.Respond([]byte("ok"))
		case errors.Is(err, ErrAlreadyAcked):
			_ = m.Respond([]byte("acked"))
		case errors.Is(err, ErrNotFound):
			_ = m.Respond([]byte("not_found"))
		case errors.Is(err, ErrUnknown):
			_ = m.Respond([]byte("unknown: " + err.Error()))
		default:
			_ = m.Respond([]byte(err.Error()))
		}
	})
	if !started {
		_ = m.Respond([]byte("gateway closing"))
	}
}
