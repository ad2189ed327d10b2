package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/gateway/groups"
	"github.com/lmq-gateway/lmq-gateway/gateway/message"
	"github.com/lmq-gateway/lmq-gateway/gateway/pushopt"
	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// Push stores msg in queue, creating the queue if needed. It returns once
// JetStream has the message (or, on accumulating queues, the part).
func (g *Messages) Push(ctx context.Context, queue string, msg Message) (AccumState, error) {
	return g.PushWith(ctx, queue, msg, PushOptions{})
}

// PushOptions are the per-message features beyond LMQ (package pushopt).
type PushOptions = pushopt.Options

// IdempotencyWindow is how long a push's IdempotencyKey is remembered: the
// shard streams' duplicate window (store.DuplicateWindow). 5 minutes, SQS's
// deduplication interval, so that an SQS MessageDeduplicationId rides on the
// same keys; JetStream's default would be 2.
const IdempotencyWindow = store.DuplicateWindow

// idempotencyID is the Nats-Msg-Id of a push with an idempotency key. The
// duplicate window is per stream, and a shard stream holds many queues: the
// id names the queue too, so that two queues never share a key's window.
func idempotencyID(queue, key string) string {
	sum := sha256.Sum256([]byte(queue))
	return hex.EncodeToString(sum[:12]) + ":" + key
}

// PushWith is Push with per-message options.
func (g *Messages) PushWith(ctx context.Context, queue string, msg Message, opts PushOptions) (AccumState, error) {
	p, err := g.push(ctx, queue, msg, opts, true)
	return p.state, err
}

// pushed is what a push did: its answer about accumulation, and the stream
// sequence of the stored message (0 for a part of an accumulation window).
type pushed struct {
	state AccumState
	seq   uint64
}

// PushSeq is PushWith on a queue that does not accumulate, returning the
// stored message's stream sequence (SQS's SequenceNumber and MessageId
// come from it); ErrInvalid on an accumulating queue.
func (g *Messages) PushSeq(ctx context.Context, queue string, msg Message, opts PushOptions) (uint64, error) {
	if g.props.Effective(queue).Accum > 0 {
		return 0, fmt.Errorf("%w: queue %q accumulates: its messages are stored as compounds", ErrInvalid, queue)
	}
	p, err := g.push(ctx, queue, msg, opts, true)
	return p.seq, err
}

// push stores msg in queue; mayCreate says whether the queue may be created
// (a plain push) or must exist (push-all, which never brings back a queue
// deleted after it listed the matching ones).
func (g *core) push(ctx context.Context, queue string, msg Message, opts PushOptions, mayCreate bool) (pushed, error) {
	if err := validName(queue); err != nil {
		return pushed{}, err
	}
	if int64(len(msg.Body)) > g.cfg.MaxMessageSize {
		return pushed{}, fmt.Errorf("%w: %d bytes, the maximum is %d", ErrTooLarge, len(msg.Body), g.cfg.MaxMessageSize)
	}
	if err := CheckHeaders(msg); err != nil {
		return pushed{}, err
	}
	if err := opts.Check(); err != nil { // pushopts.go
		return pushed{}, err
	}
	q, err := g.disp.Bind(ctx, queue, mayCreate)
	if err != nil {
		return pushed{}, err
	}
	eff := g.props.Effective(queue)
	ttl := opts.TTL
	if ttl == 0 {
		ttl = eff.TTLDuration()
	}
	prio := pushPriority(opts.Priority, eff)
	if eff.Accum > 0 {
		if opts.Delay > 0 || opts.TTL > 0 || opts.IdempotencyKey != "" || opts.Priority != nil || opts.Group != "" {
			return pushed{}, fmt.Errorf("%w: delay, ttl, priority, groups and idempotency keys are not available on accumulating queues", ErrInvalid)
		}
		if message.Stored(msg) {
			// PushStream saw a plain queue: its properties changed since.
			return pushed{}, fmt.Errorf("%w: the queue started accumulating during the push; try again", ErrUnavailable)
		}
		acc := g.acc.Load()
		if acc == nil {
			return pushed{}, fmt.Errorf("%w: accumulation is not available", ErrUnavailable)
		}
		st, err := (*acc).Push(ctx, queue, eff.AccumDuration(), eff.Retry, msg)
		if err != nil {
			return pushed{}, err
		}
		g.obs.Pushed(queue, message.Size(msg))
		return pushed{state: st}, nil
	}
	if ttl > 0 && opts.Delay >= ttl {
		return pushed{}, fmt.Errorf("%w: the message would expire before its delay ends", ErrInvalid)
	}
	now := time.Now()
	subject := q.Subject() // mapping.PrioritySubject(queue, 0), already encoded
	if prio > 0 {
		subject = mapping.PrioritySubject(queue, prio)
	}
	if opts.Delay > 0 {
		subject = mapping.ScheduleSubject(queue, uuid.NewString())
	}
	if opts.Group != "" {
		if subject, err = groups.PushSubject(queue, opts); err != nil {
			return pushed{}, err
		}
		prio = 0
	}
	m, err := g.store.Encode(ctx, queue, subject, message.Content(msg), eff.Retry)
	if err != nil {
		return pushed{}, err
	}
	if prio > 0 {
		m.Header.Set(mapping.HdrPriority, strconv.Itoa(prio))
	}
	if opts.Group != "" {
		m.Header.Set(mapping.HdrGroup, opts.Group)
	}
	if opts.IdempotencyKey != "" {
		// JetStream's de-duplication: within the stream's duplicate window
		// (IdempotencyWindow) a second message with this id is acknowledged but not
		// stored. Releases drop Nats-* headers, so a nacked copy is not
		// mistaken for a retried push.
		jsapi.SetMsgID(m.Header, idempotencyID(queue, opts.IdempotencyKey))
	}
	if ttl > 0 {
		expires := now.Add(ttl)
		m.Header.Set(mapping.HdrExpires, strconv.FormatInt(expires.UnixNano(), 10))
		if opts.Delay == 0 {
			setNatsTTL(m, ttl)
		}
	}
	if opts.Delay > 0 {
		// A JetStream message schedule: the server publishes a copy of this
		// message (headers and body) to the queue's subject when it is due,
		// and removes the schedule. Sub-second targets need RFC 3339 with
		// nanoseconds (nats.go's helper truncates to seconds).
		due := now.Add(opts.Delay)
		jsapi.SetScheduleAt(m.Header, due, mapping.PrioritySubject(queue, prio))
	}
	seq, err := g.store.Publish(ctx, "store message", q.Name(), m)
	if err == nil && !mayCreate {
		err = g.unlessDeleted(ctx, q, seq)
	}
	if err != nil {
		if !errors.Is(err, ErrUnknown) {
			// Certainly not stored: its large body goes too. When the
			// outcome is unknown the message may be stored, and a body
			// left behind is better than a message without one.
			g.store.Bodies().DropBody(ctx, m)
		}
		return pushed{}, err
	}
	g.obs.Pushed(queue, message.Size(msg))
	if opts.Group != "" {
		// The group's head, unless it has one; a failure here leaves the
		// stored message to the group sweep.
		g.disp.MarkGroups(queue)
		if err := g.groups.Promote(ctx, queue, opts.Group); err != nil {
			g.log.Warn("could not hand out a group's next message; the group sweep will",
				"queue", queue, "group", opts.Group, "err", err)
		}
		return pushed{state: AccumNo, seq: seq}, nil
	}
	if opts.Delay > 0 {
		// Wake this gateway's waiting clients when it is due (JetStream fires
		// schedules up to about a second late); other gateways re-poll.
		g.disp.NotifyAt(queue, time.Now().Add(opts.Delay+300*time.Millisecond))
		if prio > 0 {
			// Mark the queue as using priorities everywhere, so that the
			// wake-up (and other gateways' re-polls) look at its levels.
			g.disp.NotifyLevel(queue, prio)
		}
		return pushed{state: AccumNo, seq: seq}, nil
	}
	g.disp.NotifyLevel(queue, prio)
	return pushed{state: AccumNo, seq: seq}, nil
}

// unlessDeleted takes back a message a push-all just stored when its queue
// was deleted meanwhile (by another gateway), so that push-all never brings
// a deleted queue back. DeleteQueue removes the registry key before it
// purges: a message stored before the purge goes with it, and one stored
// after finds the key gone here.
func (g *core) unlessDeleted(ctx context.Context, q *dispatch.Queue, seq uint64) error {
	if !g.reg.KeyGone(ctx, q.Name()) {
		return nil
	}
	g.reg.Forget(q.Name())
	g.store.TakeBack(ctx, q.Name(), seq)
	return fmt.Errorf("queue %q: %w", q.Name(), ErrNotFound)
}

// setNatsTTL lets JetStream itself remove the message once it expires; its
// TTL has whole seconds and a minimum of one, so the gateway also checks the
// exact expiry (Lmq-Expires) before delivering.
func setNatsTTL(m *bus.Msg, ttl time.Duration) { jsapi.SetTTL(m.Header, ttl) }

// PushAll pushes msg to every existing queue whose name matches re; the result
// maps each queue to its accumulation answer (empty when none matched).
// Queues are not created by it; those out of scope are left alone.
func (g *Messages) PushAll(ctx context.Context, re *regexp.Regexp, msg Message, scope Scope) (map[string]AccumState, error) {
	names := g.reg.Matching(func(name string) bool { return re.MatchString(name) && scope.Allows(name) })
	out := make(map[string]AccumState, len(names))
	for _, name := range names {
		p, err := g.push(ctx, name, msg, PushOptions{}, false)
		st := p.state
		if errors.Is(err, ErrNotFound) {
			continue // deleted since it was listed: it stays deleted
		}
		if err != nil {
			return out, fmt.Errorf("push to %q: %w", name, err)
		}
		out[name] = st
	}
	return out, nil
}

// Notify wakes the clients waiting on queue, on every gateway: it is called
// after a message became available there (dispatch.Dispatcher.Notify).
func (g *Messages) Notify(queue string) { g.disp.Notify(queue) }

// pushPriority is the priority of a push: the option when given (in its
// range: PushOptions.Check), else the queue's priority property.
func pushPriority(opt *int, eff mapping.Effective) int {
	if opt == nil {
		return eff.Priority
	}
	return *opt
}
