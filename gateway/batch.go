package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/message"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// MaxBatch is the most messages one atomic batch push may carry (JetStream's
// limit for atomic publishes).
const MaxBatch = 1000

// PushBatch stores msgs in queue atomically (all or none, in order) with
// JetStream's atomic batch publish. Accumulating queues do not take batches.
func (g *Messages) PushBatch(ctx context.Context, queue string, msgs []Message) error {
	if err := validName(queue); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	if len(msgs) > MaxBatch {
		return fmt.Errorf("%w: a batch holds at most %d messages", ErrInvalid, MaxBatch)
	}
	if _, err := g.disp.Ensure(ctx, queue); err != nil {
		return err
	}
	eff := g.props.Effective(queue)
	if eff.Accum > 0 {
		return fmt.Errorf("%w: batch push is not available on accumulating queues", ErrInvalid)
	}
	stored := make([]*bus.Msg, 0, len(msgs))
	defer func() {
		// Not committed (nil once it is, or may be): drop the large
		// bodies it stored.
		for _, m := range stored {
			g.store.Bodies().DropBody(context.Background(), m)
		}
	}()
	var size int
	for i, msg := range msgs {
		if int64(len(msg.Body)) > g.cfg.MaxMessageSize {
			return fmt.Errorf("%w: message %d", ErrTooLarge, i+1)
		}
		// A batch's headers come in its body, so a bad one is a bad body (400).
		if err := CheckHeaders(msg); err != nil {
			return fmt.Errorf("%w: message %d: %v", ErrInvalid, i+1, err)
		}
		// A batch takes the queue's priority property (dispatch/priority.go).
		m, err := g.store.Encode(ctx, queue, mapping.PrioritySubject(queue, eff.Priority), message.Content(msg), eff.Retry)
		if err != nil {
			return err
		}
		if eff.Priority > 0 {
			m.Header.Set(mapping.HdrPriority, strconv.Itoa(eff.Priority))
		}
		if ttl := eff.TTLDuration(); ttl > 0 {
			m.Header.Set(mapping.HdrExpires, strconv.FormatInt(time.Now().Add(ttl).UnixNano(), 10))
			setNatsTTL(m, ttl)
		}
		stored = append(stored, m)
		size += len(msg.Body)
	}
	if err := g.store.PublishBatch(ctx, stored); err != nil {
		if errors.Is(err, ErrUnknown) {
			stored = nil // it may be stored: its bodies stay
		}
		return err
	}
	stored = nil
	g.obs.Pushed(queue, size)
	g.Notify(queue)
	return nil
}
