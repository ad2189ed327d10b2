package gateway

import (
	"context"
	"errors"
	"io"

	"github.com/lmq-gateway/lmq-gateway/gateway/message"
)

// DefaultMaxBufferedBody is Config.MaxBufferedBody's default: four times the
// embedded server's default NATS payload limit (8 MiB).
const DefaultMaxBufferedBody = 32 << 20

// PushStream is PushWith for a body read from body (msg.Body is ignored): a
// front end hands over the request body unread, so that the core's memory
// for one push stays near the NATS payload limit whatever the body's size.
// It reads up to the inline limit; a body that ends there is pushed as
// usual. A longer one is streamed into the Object Store (enforcing
// MaxMessageSize as it goes: beyond it, ErrTooLarge and nothing is kept) and
// the queued message refers to it. Pushes to accumulating queues hold the
// body in memory (their parts are kept together), bounded by
// Config.MaxBufferedBody.
//
// Errors of body itself come back wrapped (errors.As finds them) inside
// ErrInvalid, or ErrTooLarge for the core's own limit.
func (g *Messages) PushStream(ctx context.Context, queue string, msg Message, body io.Reader, opts PushOptions) (AccumState, error) {
	if err := validName(queue); err != nil {
		return "", err
	}
	if err := CheckHeaders(msg); err != nil {
		return "", err
	}
	br := message.NewBodyReader(body, g.cfg.MaxMessageSize)
	limit := g.store.InlineLimit()
	if _, err := g.disp.Ensure(ctx, queue); err != nil {
		return "", err
	}
	if g.props.Effective(queue).Accum > 0 {
		limit = min(g.cfg.MaxBufferedBody, g.cfg.MaxMessageSize)
		br.Max = limit
	}
	prefix, err := io.ReadAll(io.LimitReader(br, limit+1))
	if err != nil {
		return "", br.Fail(err)
	}
	if int64(len(prefix)) <= limit {
		msg.Body = prefix
		return g.PushWith(ctx, queue, msg, opts)
	}
	name, size, err := g.store.Bodies().PutBody(ctx, queue, prefix, br)
	prefix = nil
	if err != nil {
		if br.Err() != nil {
			return "", br.Fail(br.Err())
		}
		return "", err
	}
	msg = message.InStore(msg, name, size)
	st, err := g.PushWith(ctx, queue, msg, opts)
	if err != nil {
		// PushWith drops the object itself when the publish fails, but not
		// when it refuses the push before (bad options, the queue turned
		// accumulating meanwhile). When the outcome is unknown the message
		// may be stored and refer to the object: it stays.
		if !errors.Is(err, ErrUnknown) {
			g.store.Bodies().DeleteBody(ctx, name)
		}
		return "", err
	}
	return st, nil
}
