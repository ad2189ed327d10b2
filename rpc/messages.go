package rpc

import (
	"cmp"
	"strconv"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/mpack"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/rpc/wire"
)

// A queue's waiting messages by id (beyond LMQ), as HTTP's
// GET /queues/{name}/messages and DELETE /queues/{name}/messages/{id}:
// messages(name[, n[, {body}]]) answers an array of maps, one per message
// in the order they will be delivered; delete_message(name, id) answers
// "ok", or not_found when the message is gone, in flight or not one of the
// queue's waiting messages; move_message(name, id, target) moves it to
// another queue, answered as delete_message.

// defaultListed is how many messages messages() lists without n (as HTTP).
const defaultListed = 10

func (c *conn) messages(p [][]byte) (result, error) {
	name, err := argString(p[0], "name")
	if err != nil {
		return result{}, err
	}
	n := defaultListed
	if len(p) > 1 {
		v, err := c.decodeArg(p[1])
		if err != nil {
			return result{}, err
		}
		u, ok := wholeNumber(v)
		if !ok || u < 1 || u > gateway.MaxPeek {
			return result{}, badarg("n must be an integer from 1 to %d", gateway.MaxPeek)
		}
		n = int(u)
	}
	withBody := false
	if len(p) > 2 {
		v, err := c.decodeArg(p[2])
		if err != nil {
			return result{}, err
		}
		m, ok := v.(map[string]any)
		if !ok {
			return result{}, badarg("messages options must be a map")
		}
		for k, v := range m {
			b, ok := v.(bool)
			if k != "body" || !ok {
				return result{}, badarg("unknown messages option %s, or not a boolean (known: body)", k)
			}
			withBody = b
		}
	}
	// A listing: its answer, up to n message heads and bodies of 64 KiB, is
	// counted before it is built (outbox.reserve).
	est := &c.s.messagesEst
	if withBody {
		est = &c.s.messagesBodyEst
	}
	if err := c.out.reserve(c.ctx, est.get()); err != nil {
		return result{}, err
	}
	ps, err := c.s.core.Inspect.Messages(c.ctx, name, n, withBody)
	if err != nil {
		return result{}, err
	}
	now := time.Now()
	b := wire.AppendArrayHeader(nil, len(ps))
	for _, m := range ps {
		b = c.appendWaiting(b, m, now, withBody)
	}
	est.observe(len(b))
	return result{b: b}, nil
}

// appendWaiting encodes one waiting message as a map: id (the stream
// sequence, an integer), priority, group (only when it has one),
// content_type, size, delivered, retry (the retry property at push) and
// pushed_at (Unix seconds) and age (seconds), each only when known, object,
// compound; with body, its content (MessagePack content as the object it
// holds, as pull answers it, else binary; an array of the parts' for a
// compound message) and truncated (content cut to gateway.MaxPeekBody).
func (c *conn) appendWaiting(b []byte, m gateway.Peeked, now time.Time, withBody bool) []byte {
	dl := c.s.opt.Dialect
	keys := 7
	if m.Group != "" {
		keys++
	}
	if m.Retry >= 0 {
		keys++
	}
	if !m.PushedAt.IsZero() {
		keys += 2
	}
	if withBody {
		keys += 2
	}
	b = wire.AppendMapHeader(b, keys)
	b = mpack.AppendUint(wire.AppendStr(b, "id", dl), m.Seq)
	b = wire.AppendInt(wire.AppendStr(b, "priority", dl), int64(m.Priority))
	if m.Group != "" {
		b = wire.AppendStr(wire.AppendStr(b, "group", dl), m.Group, dl)
	}
	b = wire.AppendStr(wire.AppendStr(b, "content_type", dl), cmp.Or(m.ContentType, mapping.DefaultContentType), dl)
	b = wire.AppendInt(wire.AppendStr(b, "size", dl), m.Size)
	b = wire.AppendInt(wire.AppendStr(b, "delivered", dl), int64(m.Delivered))
	if m.Retry >= 0 {
		b = wire.AppendInt(wire.AppendStr(b, "retry", dl), int64(m.Retry))
	}
	b = wire.AppendBool(wire.AppendStr(b, "object", dl), m.Object)
	b = wire.AppendBool(wire.AppendStr(b, "compound", dl), m.Compound)
	if !m.PushedAt.IsZero() {
		b = wire.AppendFloat64(wire.AppendStr(b, "pushed_at", dl), float64(m.PushedAt.UnixNano())/1e9)
		b = wire.AppendFloat64(wire.AppendStr(b, "age", dl), max(now.Sub(m.PushedAt).Seconds(), 0))
	}
	if withBody {
		b = wire.AppendStr(b, "content", dl)
		if m.Compound && m.PartsError == "" {
			b = wire.AppendArrayHeader(b, len(m.Parts))
			for _, part := range m.Parts {
				b = c.appendContent(b, gateway.Message{ContentType: part.ContentType, Body: part.Body})
			}
		} else {
			b = c.appendContent(b, gateway.Message{ContentType: m.ContentType, Body: m.Body})
		}
		b = wire.AppendBool(wire.AppendStr(b, "truncated", dl), m.Truncated)
	}
	return b
}

func (c *conn) deleteMessage(p [][]byte) (result, error) {
	name, err := argString(p[0], "name")
	if err != nil {
		return result{}, err
	}
	id, err := c.messageID(p[1])
	if err != nil {
		return result{}, err
	}
	if err := c.s.core.Inspect.DeleteMessage(c.ctx, name, id); err != nil {
		return result{}, err
	}
	return c.str("ok"), nil
}

// moveMessage is move_message(name, id, target): the waiting message moved
// to the queue target (made when it does not exist), as HTTP's
// POST /queues/{name}/messages/{id}/move?to=target.
func (c *conn) moveMessage(p [][]byte) (result, error) {
	name, err := argString(p[0], "name")
	if err != nil {
		return result{}, err
	}
	id, err := c.messageID(p[1])
	if err != nil {
		return result{}, err
	}
	target, err := argString(p[2], "target")
	if err != nil {
		return result{}, err
	}
	if err := c.s.core.Inspect.MoveMessage(c.ctx, name, id, target); err != nil {
		return result{}, err
	}
	return c.str("ok"), nil
}

// messageID reads a waiting message's id argument: a positive integer, or
// its decimal text (as HTTP's path has it).
func (c *conn) messageID(arg []byte) (uint64, error) {
	v, err := c.decodeArg(arg)
	if err != nil {
		return 0, err
	}
	id, ok := wholeNumber(v)
	if s, isStr := v.(string); isStr {
		id, err = strconv.ParseUint(s, 10, 64)
		ok = err == nil
	}
	if !ok || id == 0 {
		return 0, badarg("id must be a positive integer (an id messages lists)")
	}
	return id, nil
}

// wholeNumber reads a decoded non-negative integer (a float only when
// whole and exact); ok is false for anything else.
func wholeNumber(v any) (uint64, bool) {
	switch n := v.(type) {
	case int64:
		return uint64(n), n >= 0
	case uint64:
		return n, true
	case float64:
		if n >= 0 && n < 1<<53 && n == float64(uint64(n)) {
			return uint64(n), true
		}
	}
	return 0, false
}
