package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxBufferedBody is Config.MaxBufferedBody's default: four times the
// embedded server's default NATS payload limit (8 MiB).
const DefaultMaxBufferedBody = 32 << 20

// storedBody is a body the push path already wrote to the Object Store: the
// message carries only the reference (store.Content.Object).
type storedBody struct {
	name string
	size int64
}

// size is the body's length, also when it is in the Object Store already.
func (m Message) size() int {
	if m.stored != nil {
		return int(m.stored.size)
	}
	return len(m.Body)
}

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
	br := &bodyReader{r: body, max: g.cfg.MaxMessageSize}
	limit := g.store.InlineLimit()
	if _, err := g.disp.Ensure(ctx, queue); err != nil {
		return "", err
	}
	if g.props.Effective(queue).Accum > 0 {
		limit = min(g.cfg.MaxBufferedBody, g.cfg.MaxMessageSize)
		br.max = limit
	}
	prefix, err := io.ReadAll(io.LimitReader(br, limit+1))
	if err != nil {
		return "", br.fail(err)
	}
	if int64(len(prefix)) <= limit {
		msg.Body = prefix
		return g.PushWith(ctx, queue, msg, opts)
	}
	name, size, err := g.store.Bodies().PutBody(ctx, queue, prefix, br)
	prefix = nil
	if err != nil {
		if br.err != nil {
			return "", br.fail(br.err)
		}
		return "", err
	}
	msg.Body, msg.stored = nil, &storedBody{name: name, size: size}
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

// errBodyTooLarge is bodyReader's error beyond its limit.
var errBodyTooLarge = errors.New("body too large")

// bodyReader reads a pushed body, counting it against max and remembering
// the reader's own error (to tell it from JetStream's).
type bodyReader struct {
	r   io.Reader
	max int64
	n   int64
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if room := b.max + 1 - b.n; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n > b.max {
		b.err = errBodyTooLarge
		return n, b.err
	}
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// fail classifies an error met while reading the body.
func (b *bodyReader) fail(err error) error {
	if errors.Is(err, errBodyTooLarge) {
		return fmt.Errorf("%w: the body is larger than %d bytes", ErrTooLarge, b.max)
	}
	return fmt.Errorf("%w: reading body: %w", ErrInvalid, err)
}
