package rpc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"mime"
	"regexp"
	"strings"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/clientgone"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/rpc/wire"
)

// rpcError is an error answered to the client as a string: code, or
// "code: detail". Codes: undef, badarg, not_found, invalid_regexp,
// invalid_props, too_large, unavailable, internal_error.
type rpcError struct {
	code   string
	detail string
}

func (e *rpcError) Error() string {
	if e.detail == "" {
		return e.code
	}
	return e.code + ": " + e.detail
}

func badarg(format string, args ...any) error {
	return &rpcError{code: "badarg", detail: fmt.Sprintf(format, args...)}
}

var errClientGone = errors.New("client went away")

// result is what a method answers: encoded bytes, and the delivery they carry
// (to abandon if they cannot be written).
type result struct {
	b        []byte
	delivery *gateway.Delivery
	// admitted: the request was a pull the outbox admitted (outbox.admit).
	admitted bool
}

// isListing reports whether method is a listing: its answer may be large,
// and is built as soon as it is served (no wait, unlike a pull's). Those
// are served one at a time per connection, counted before they are built
// (outbox.startListing, reserve).
func isListing(method string) bool {
	switch method {
	case "get_default_props", "messages":
		return true
	}
	return false
}

// handle runs one request and queues its answer.
func (c *conn) handle(req wire.Request) {
	res, err := c.call(req)
	resp := make([]byte, 0, 16+len(res.b))
	if err != nil {
		resp = wire.AppendErrorResponse(resp, req.MsgID, c.errorString(req, err), c.s.opt.Dialect)
	} else {
		resp = wire.AppendResponse(resp, req.MsgID, res.b)
	}
	if res.delivery == nil {
		switch {
		case res.admitted:
			c.out.sendAdmitted(resp, false)
		case isListing(req.Method):
			c.out.sendListing(resp)
		default:
			c.send(resp, false)
		}
		return
	}
	// If the client is gone, give the message back at once, without counting a
	// retry, instead of letting it wait for its timeout.
	// The reader may not have seen the client's close yet, and a write to a
	// socket the peer closed still succeeds: ask the socket itself.
	werr := errClientGone
	if !c.clientGone.Load() && !clientgone.Closed(c.nc) {
		werr = c.out.sendAdmitted(resp, true)
	} else {
		c.out.unadmit()
	}
	if werr != nil {
		c.log.Debug("rpc delivery not written, abandoning", "queue", res.delivery.Queue, "err", werr)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 10*time.Second)
		defer cancel()
		c.s.core.Messages.Abandon(ctx, res.delivery)
		return
	}
	c.bind(res.delivery)
}

// errorString maps an error to the string sent to the client: an rpcError
// as it says, the core's errors by their kind (gateway.KindOf, where their
// precedence is decided).
func (c *conn) errorString(req wire.Request, err error) string {
	var re *rpcError
	if errors.As(err, &re) {
		return re.Error()
	}
	switch gateway.KindOf(err) {
	case gateway.KindInvalid:
		if errors.Is(err, mapping.ErrInvalidProps) {
			return "invalid_props: " + err.Error()
		}
		return "badarg: " + err.Error()
	case gateway.KindNotFound:
		return "not_found"
	case gateway.KindTooManyQueues:
		return "too_many_queues: " + err.Error()
	case gateway.KindTooLarge:
		return "too_large"
	case gateway.KindHeaderTooLarge:
		return "badarg: " + err.Error()
	case gateway.KindUnavailable:
		c.log.Warn("rpc core unavailable", "method", req.Method, "err", err)
		return "unavailable"
	case gateway.KindUnknown:
		// Distinct from "unavailable" (nothing happened): a push may be
		// stored, an ack may be applied; retrying a push may duplicate it.
		c.log.Warn("rpc outcome unknown", "method", req.Method, "err", err)
		return "unknown: " + err.Error()
	case gateway.KindCanceled:
		return "unavailable: request cancelled"
	}
	if errors.Is(err, errAnswerDropped) {
		return "unavailable: request cancelled"
	}
	c.log.Error("rpc request failed", "method", req.Method, "err", err)
	return "internal_error"
}

// call dispatches a request to its method.
func (c *conn) call(req wire.Request) (result, error) {
	if req.Method == "" {
		return result{}, &rpcError{code: "undef", detail: "method is not a string"}
	}
	m, ok := methods[req.Method]
	if !ok {
		// create was removed in LMQ 0.4; like LMQ, it is simply not there.
		return result{}, &rpcError{code: "undef", detail: req.Method}
	}
	if !req.ParamsOK {
		return result{}, badarg("params is not an array")
	}
	if len(req.Params) < m.minArgs || len(req.Params) > m.maxArgs {
		return result{}, badarg("%s takes %s", req.Method, m.usage)
	}
	return m.fn(c, req.Params)
}

type method struct {
	minArgs, maxArgs int
	usage            string
	fn               func(c *conn, p [][]byte) (result, error)
}

// methods is LMQ's RPC method table (lmq_mpac). It is read-only.
var methods = map[string]method{
	"push":              {2, 3, "(name, content[, {delay, ttl, idempotency_key, priority, group}])", (*conn).push},
	"pull":              {1, 2, "(name[, timeout])", (*conn).pull},
	"push_all":          {2, 2, "(regexp, content)", (*conn).pushAll},
	"pull_any":          {1, 2, "(regexp[, timeout])", (*conn).pullAny},
	"done":              {2, 2, "(name, id)", replyMethod(gateway.Ack)},
	"retain":            {2, 2, "(name, id)", replyMethod(gateway.Ext)},
	"release":           {2, 2, "(name, id)", replyMethod(gateway.Nack)},
	"delete":            {1, 1, "(name)", (*conn).deleteQueue},
	"update_props":      {1, 2, "(name[, props])", (*conn).updateProps},
	"set_default_props": {1, 1, "(list)", (*conn).setDefaultProps},
	"get_default_props": {0, 0, "no arguments", (*conn).getDefaultProps},
	// Beyond LMQ: a queue's waiting messages by id (messages.go).
	"messages":       {1, 3, "(name[, n[, {body}]])", (*conn).messages},
	"delete_message": {2, 2, "(name, id)", (*conn).deleteMessage},
	"move_message":   {3, 3, "(name, id, target)", (*conn).moveMessage},
	// Beyond LMQ.
	"purge": {1, 1, "(name)", (*conn).purge},
}

func (c *conn) str(s string) result { return result{b: wire.AppendStr(nil, s, c.s.opt.Dialect)} }

func argString(p []byte, what string) (string, error) {
	s, ok := wire.DecodeString(p)
	if !ok {
		return "", badarg("%s must be a string", what)
	}
	return s, nil
}

func argRegexp(p []byte) (*regexp.Regexp, error) {
	s, err := argString(p, "regexp")
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, &rpcError{code: "invalid_regexp", detail: err.Error()}
	}
	return re, nil
}

// argWait reads the optional timeout in seconds (integer or float), at most
// mapping.MaxSeconds. Absent means wait forever.
func argWait(p [][]byte) (time.Duration, error) {
	if len(p) < 2 {
		return -1, nil
	}
	f, ok := wire.DecodeNumber(p[1])
	if !ok {
		return 0, badarg("timeout must be a non-negative number of seconds")
	}
	d, err := mapping.SecondsDuration("timeout", f)
	if err != nil {
		return 0, badarg("%v", err)
	}
	return d, nil
}

// content stores pushed content as the MessagePack bytes the client sent.
func content(p []byte) gateway.Message {
	return gateway.Message{ContentType: mapping.ContentTypeMsgpack, Body: p}
}

func (c *conn) push(p [][]byte) (result, error) {
	name, err := argString(p[0], "name")
	if err != nil {
		return result{}, err
	}
	var opts gateway.PushOptions
	if len(p) == 3 {
		if opts, err = c.pushOptions(p[2]); err != nil {
			return result{}, err
		}
	}
	st, err := c.s.core.Messages.PushWith(c.ctx, name, content(p[1]), opts)
	if err != nil {
		return result{}, err
	}
	switch st {
	case gateway.AccumNew:
		return c.str("packing started"), nil
	case gateway.AccumYes:
		return c.str("packed"), nil
	}
	return c.str("ok"), nil
}

// pushOptions reads push's optional third argument, a map beyond LMQ:
// {"delay": seconds, "ttl": seconds, "idempotency_key": string, "priority":
// 0..9, "group": string}, each with the core's parser
// (PushOptions.SetValue). The key is the HTTP Idempotency-Key header: a
// push retried with the same key within gateway.IdempotencyWindow (after
// an "unknown: ..." error) is stored once.
func (c *conn) pushOptions(b []byte) (gateway.PushOptions, error) {
	var o gateway.PushOptions
	v, err := c.decodeArg(b)
	if err != nil {
		return o, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return o, badarg("push options must be a map")
	}
	for k, v := range m {
		if !gateway.IsPushOption(k) {
			return o, badarg("unknown push option %s (known: %s)", k, gateway.PushOptionNames)
		}
		if err := o.SetValue(k, v); err != nil {
			return o, badarg("push option %v", err)
		}
	}
	return o, nil
}

func (c *conn) pushAll(p [][]byte) (result, error) {
	re, err := argRegexp(p[0])
	if err != nil {
		return result{}, err
	}
	if _, err := c.s.core.Messages.PushAll(c.ctx, re, content(p[1]), nil); err != nil {
		return result{}, err
	}
	return c.str("ok"), nil
}

func (c *conn) pull(p [][]byte) (result, error) {
	name, err := argString(p[0], "name")
	if err != nil {
		return result{}, err
	}
	return c.deliver(p, func(ctx context.Context, wait time.Duration) (*gateway.Delivery, error) {
		return c.s.core.Messages.Pull(ctx, name, wait)
	})
}

func (c *conn) pullAny(p [][]byte) (result, error) {
	re, err := argRegexp(p[0])
	if err != nil {
		return result{}, err
	}
	return c.deliver(p, func(ctx context.Context, wait time.Duration) (*gateway.Delivery, error) {
		return c.s.core.Messages.PullAny(ctx, re, wait, nil)
	})
}

// deliver runs a pull, with the wait its params p give (argWait, checked
// after the pull's first argument), on the connection's wait context and
// encodes what it got. A pull cut short by the client leaving or the server
// draining answers "empty" (if anyone still listens).
//
// A pull takes a message only once the outbox admits it (outbox.admit):
// while the connection's answers not yet written would pass their bound (a
// client that does not read them), each message taken would only add to
// them. That wait comes before, and does not count against, the pull's own.
func (c *conn) deliver(p [][]byte, pull func(context.Context, time.Duration) (*gateway.Delivery, error)) (result, error) {
	wait, err := argWait(p)
	if err != nil {
		return result{}, err
	}
	if err := c.out.admit(c.waitCtx); err != nil {
		return c.str("empty"), nil
	}
	d, err := pull(c.waitCtx, wait)
	if err != nil {
		// A wait cut short by the client's end of sending (or a drain) is
		// "empty"; any other error, e.g. an invalid name, is answered as such
		// even when the client has half-closed since.
		if c.waitCtx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return result{b: c.str("empty").b, admitted: true}, nil
		}
		return result{admitted: true}, err
	}
	if d == nil {
		return result{b: c.str("empty").b, admitted: true}, nil
	}
	return result{b: c.appendDelivery(nil, d), delivery: d, admitted: true}, nil
}

// appendDelivery encodes a delivery as LMQ did: a map with the keys in the
// order queue, id, type, retry, content. A message of a priority above 0
// (beyond LMQ) has a sixth key, priority, after content: LMQ's clients read
// the map by key, and without priorities in use nothing changes.
func (c *conn) appendDelivery(b []byte, d *gateway.Delivery) []byte {
	dl := c.s.opt.Dialect
	n := 5
	if d.Priority > 0 {
		n++
	}
	if d.Group != "" {
		n++ // beyond LMQ too: "group", after priority
	}
	b = wire.AppendMapHeader(b, n)
	b = c.appendDeliveryFields(b, d)
	if d.Priority > 0 {
		b = wire.AppendStr(b, "priority", dl)
		b = wire.AppendInt(b, int64(d.Priority))
	}
	if d.Group != "" {
		b = wire.AppendStr(b, "group", dl)
		b = wire.AppendStr(b, d.Group, dl)
	}
	return b
}

// appendDeliveryFields writes appendDelivery's five LMQ keys.
func (c *conn) appendDeliveryFields(b []byte, d *gateway.Delivery) []byte {
	dl := c.s.opt.Dialect
	b = wire.AppendStr(b, "queue", dl)
	b = wire.AppendStr(b, d.Queue, dl)
	b = wire.AppendStr(b, "id", dl)
	b = wire.AppendStr(b, d.ID, dl)
	b = wire.AppendStr(b, "type", dl)
	if d.Compound {
		b = wire.AppendStr(b, "package", dl)
	} else {
		b = wire.AppendStr(b, "normal", dl)
	}
	b = wire.AppendStr(b, "retry", dl)
	b = wire.AppendInt(b, int64(d.RetryRemaining))
	b = wire.AppendStr(b, "content", dl)
	if !d.Compound {
		return c.appendContent(b, d.Message)
	}
	b = wire.AppendArrayHeader(b, len(d.Parts))
	for _, part := range d.Parts {
		b = c.appendContent(b, part)
	}
	return b
}

// appendContent writes a message's content: MessagePack content (pushed over
// RPC) as the object it holds, in the answer dialect; anything else, or
// MessagePack content that does not decode, as binary.
func (c *conn) appendContent(b []byte, m gateway.Message) []byte {
	if isMsgpack(m.ContentType) {
		if out, err := wire.Transcode(b, m.Body, c.s.opt.Dialect, c.s.opt.Limits.MaxDepth); err == nil {
			return out
		}
	}
	return wire.AppendBin(b, m.Body, c.s.opt.Dialect)
}

func isMsgpack(contentType string) bool {
	if contentType == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt, _, _ = strings.Cut(strings.ToLower(contentType), ";")
		mt = strings.TrimSpace(mt)
	}
	return mt == mapping.ContentTypeMsgpack
}

func replyMethod(kind gateway.ReplyKind) func(c *conn, p [][]byte) (result, error) {
	return func(c *conn, p [][]byte) (result, error) {
		name, err := argString(p[0], "name")
		if err != nil {
			return result{}, err
		}
		id, err := argString(p[1], "id")
		if err != nil {
			return result{}, err
		}
		if err := c.s.core.Messages.Reply(c.ctx, name, id, kind); err != nil {
			return result{}, err
		}
		if kind != gateway.Ext {
			c.unbind(id)
		}
		return c.str("ok"), nil
	}
}

func (c *conn) deleteQueue(p [][]byte) (result, error) {
	name, err := argString(p[0], "name")
	if err != nil {
		return result{}, err
	}
	// LMQ's delete answered ok whether or not the queue existed.
	if err := c.s.core.Queues.DeleteQueue(c.ctx, name); err != nil && !errors.Is(err, gateway.ErrNotFound) {
		return result{}, err
	}
	return c.str("ok"), nil
}

// decodeArg decodes a structured argument into Go values within the limits.
func (c *conn) decodeArg(p []byte) (any, error) {
	v, err := wire.DecodeValue(p, c.s.opt.Limits)
	if err != nil {
		return nil, badarg("%v", err)
	}
	return v, nil
}

func (c *conn) updateProps(p [][]byte) (result, error) {
	name, err := argString(p[0], "name")
	if err != nil {
		return result{}, err
	}
	if len(p) == 1 {
		if err := c.s.core.Queues.ResetProps(c.ctx, name); err != nil {
			return result{}, err
		}
		return c.str("ok"), nil
	}
	v, err := c.decodeArg(p[1])
	if err != nil {
		return result{}, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return result{}, &rpcError{code: "invalid_props", detail: "props must be a map"}
	}
	props, err := mapping.PropsFromMap(m)
	if err != nil {
		return result{}, err
	}
	if err := c.s.core.Queues.UpdateProps(c.ctx, name, props); err != nil {
		return result{}, err
	}
	return c.str("ok"), nil
}

func (c *conn) setDefaultProps(p [][]byte) (result, error) {
	v, err := c.decodeArg(p[0])
	if err != nil {
		return result{}, err
	}
	arr, ok := v.([]any)
	if !ok {
		return result{}, &rpcError{code: "invalid_props", detail: "the default list must be an array of [regexp, props]"}
	}
	list, err := mapping.DefaultListFromSlice(arr)
	if err != nil {
		return result{}, err
	}
	if err := c.s.core.Queues.SetDefaultProps(c.ctx, list); err != nil {
		return result{}, err
	}
	return c.str("ok"), nil
}

func (c *conn) getDefaultProps(_ [][]byte) (result, error) {
	// A listing: its answer, as large as the default list, is counted
	// before it is built (outbox.reserve).
	if err := c.out.reserve(c.ctx, c.s.defaultsEst.get()); err != nil {
		return result{}, err
	}
	list, err := c.s.core.Queues.DefaultProps(c.ctx)
	if err != nil {
		return result{}, err
	}
	// LMQ reported accum under its old name.
	b, err := wire.AppendAny(nil, wholeAsInt(list.Slice("pack")), c.s.opt.Dialect)
	if err != nil {
		return result{}, fmt.Errorf("encode default list: %w", err)
	}
	c.s.defaultsEst.observe(len(b))
	return result{b: b}, nil
}

// wholeAsInt turns whole float64 values into int64, recursively. Properties
// keep seconds as floats, but LMQ answered the numbers it was given, and
// clients gave whole seconds as integers (30, not 30.0); the JSON side prints
// them the same way (%.15g).
func wholeAsInt(v any) any {
	switch v := v.(type) {
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v)
		}
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = wholeAsInt(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = wholeAsInt(e)
		}
		return out
	}
	return v
}
