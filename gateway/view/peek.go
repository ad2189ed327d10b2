package view

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// What the web console (package console) shows of a queue's messages:
// looking at them must never take, delay or change them.

// Bounds of Peek. A peek answers a person looking at a page, so it shows
// the head of a queue and the head of each message, not everything.
const (
	// MaxPeek bounds the messages one Peek returns.
	MaxPeek = 50
	// MaxPeekBody bounds the body bytes Peek returns per message (all parts
	// of a compound message together).
	MaxPeekBody = 64 << 10
	// MaxPeekParts bounds the parts Peek returns per compound message.
	MaxPeekParts = 100
)

// Peeked is one waiting message as Peek sees it. Everything in it was read
// back from JetStream, where anyone allowed to publish on a queue subject
// may have stored anything: values that do not parse are left zero.
type Peeked struct {
	// Seq is the message's stream sequence.
	Seq uint64
	// Priority is the message's priority (0..mapping.MaxPriority): from
	// its subject, or for a dead letter from the header it kept.
	Priority int
	// ContentType as given at push ("" when none was given).
	ContentType string
	// Kept are the headers a preserve-header hook kept.
	Kept []mapping.Header
	// PushedAt is the push time; zero when unknown.
	PushedAt time.Time
	// Expires is when the message expires (ttl); zero for never.
	Expires time.Time
	// DiedAt is when a dead letter died; zero for other messages (or when
	// unknown).
	DiedAt time.Time
	// Retry is the retry property at push; -1 when unknown.
	Retry int
	// Delivered counts the deliveries earlier copies used.
	Delivered int
	// Size is the body's size in bytes (of the Object Store object for a
	// large body; -1 when that object does not answer).
	Size int64
	// Object is true when the body is in the Object Store: Body is then
	// empty (it is not loaded to be looked at).
	Object bool
	// Body is the body's first MaxPeekBody bytes (a normal message).
	Body []byte
	// Truncated is true when Body or Parts were cut.
	Truncated bool
	// Compound is true for an accumulated message; Parts are its parts
	// (at most MaxPeekParts, bodies cut to share MaxPeekBody), PartCount
	// their number. PartsError says why the parts could not be decoded
	// (Body then holds the raw bytes).
	Compound   bool
	Parts      []mapping.Part
	PartCount  int
	PartsError string
}

// Peek returns up to n (at most MaxPeek) of the queue's next waiting
// messages, in the order pulls would get them, without taking them: its
// priority levels from the highest down (the dispatcher serves them
// strictly so, gateway/dispatch/priority.go), and within a level the level's subject from
// just after the last message its consumer handed out (from the start when
// the level has no consumer), by direct "next by subject" reads. Messages
// handed out and not yet answered are not shown, so a message whose delivery
// timed out in place may be missing until it is handed out again. store.ErrNotFound
// when the queue does not exist.
func (r *Reader) Peek(ctx context.Context, queue string, n int) ([]Peeked, error) {
	n = min(max(n, 0), MaxPeek)
	st, err := r.core.Stream(ctx, queue)
	if err != nil {
		return nil, err
	}
	levels, err := waitingLevels(ctx, st, queue)
	if err != nil {
		return nil, err
	}
	out := make([]Peeked, 0, n)
	for _, p := range levels {
		if len(out) == n {
			break
		}
		from, err := levelFrom(ctx, st, queue, p)
		if err != nil {
			return out, err
		}
		ps, err := r.peekSubject(ctx, st, mapping.PrioritySubject(queue, p), from, n-len(out))
		out = append(out, ps...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// OldestWaiting returns when the oldest of the queue's next waiting
// messages was pushed: the earliest push time among the heads of its
// priority levels (Peek's first message is the highest priority's, which
// need not be the one waiting longest). Zero when none is waiting or its
// push time is unknown; store.ErrNotFound when the queue does not exist.
func (r *Reader) OldestWaiting(ctx context.Context, queue string) (time.Time, error) {
	st, err := r.core.Stream(ctx, queue)
	if err != nil {
		return time.Time{}, err
	}
	levels, err := waitingLevels(ctx, st, queue)
	if err != nil {
		return time.Time{}, err
	}
	var oldest time.Time
	for _, p := range levels {
		from, err := levelFrom(ctx, st, queue, p)
		if err != nil {
			return time.Time{}, err
		}
		ps, err := r.peekSubject(ctx, st, mapping.PrioritySubject(queue, p), from, 1)
		if err != nil {
			return time.Time{}, err
		}
		if len(ps) == 1 && !ps[0].PushedAt.IsZero() && (oldest.IsZero() || ps[0].PushedAt.Before(oldest)) {
			oldest = ps[0].PushedAt
		}
	}
	return oldest, nil
}

// waitingLevels returns the queue's priority levels that may hold waiting
// messages, highest first: those of 1..MaxPriority whose subjects hold
// messages (one stream info request filtered to them), then always 0.
func waitingLevels(ctx context.Context, st jetstream.Stream, queue string) ([]int, error) {
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(mapping.PriorityWildcard(queue)))
	if err != nil {
		return nil, store.Classify("peek", err)
	}
	levels := make([]int, 0, 2)
	for p := mapping.MaxPriority; p >= 1; p-- {
		if info.State.Subjects[mapping.PrioritySubject(queue, p)] > 0 {
			levels = append(levels, p)
		}
	}
	return append(levels, 0), nil
}

// levelFrom is the stream sequence from which level p's waiting messages
// start: just after the last one its consumer handed out, 1 when the level
// has no consumer (none made yet, or removed unused: then nothing of it is
// in flight).
func levelFrom(ctx context.Context, st jetstream.Stream, queue string, p int) (uint64, error) {
	name := mapping.ConsumerName(queue)
	if p > 0 {
		name = mapping.PriorityConsumerName(queue, p)
	}
	c, err := st.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return 1, nil
	}
	if err != nil {
		return 0, store.Classify("peek", err)
	}
	if ci := c.CachedInfo(); ci != nil {
		return ci.Delivered.Stream + 1, nil
	}
	return 1, nil
}

// PeekDead returns up to n (at most MaxPeek) of the queue's oldest dead
// letters, without removing them; DiedAt and Delivered say when they died
// and after how many deliveries. store.ErrNotFound when the queue does not exist.
func (r *Reader) PeekDead(ctx context.Context, queue string, n int) ([]Peeked, error) {
	n = min(max(n, 0), MaxPeek)
	st, err := r.core.Stream(ctx, queue)
	if err != nil {
		return nil, err
	}
	return r.peekSubject(ctx, st, mapping.DeadSubject(queue), 1, n)
}

// peekSubject reads up to n messages of subject from stream sequence from
// on, one direct "next by subject" read each.
func (r *Reader) peekSubject(ctx context.Context, st jetstream.Stream, subject string, from uint64, n int) ([]Peeked, error) {
	out := make([]Peeked, 0, n)
	for len(out) < n {
		raw, err := st.GetMsg(ctx, from, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return out, store.Classify("peek", err)
		}
		out = append(out, r.peeked(ctx, raw))
		from = raw.Sequence + 1
	}
	return out, nil
}

// peeked decodes one stored message for Peek, within its bounds.
func (r *Reader) peeked(ctx context.Context, raw *jetstream.RawStreamMsg) Peeked {
	h := raw.Header
	if h == nil {
		h = nats.Header{}
	}
	s := store.ReadStamps(h)
	p := Peeked{
		Seq:         raw.Sequence,
		Priority:    store.MessagePriority(raw.Subject, h),
		ContentType: h.Get(mapping.HdrContentType),
		Retry:       s.Retry,
		Delivered:   s.Delivered,
		Size:        int64(len(raw.Data)),
		Compound:    h.Get(mapping.HdrKind) == mapping.KindCompound,
	}
	if s.PushedAt > 0 {
		p.PushedAt = time.Unix(0, s.PushedAt)
	}
	if s.Expires > 0 {
		p.Expires = time.Unix(0, s.Expires)
	}
	if v := h.Get(mapping.HdrDeadAt); v != "" {
		p.DiedAt, _ = time.Parse(time.RFC3339Nano, v) // garbage reads as unknown
	}
	p.Kept = append(p.Kept, store.KeptHeaders(h)...)
	p.Kept = mapping.LastByName(p.Kept) // map order is random: sorted for the page
	if ref := h.Get(mapping.HdrObject); ref != "" {
		// A large body stays where it is: its size is enough for a look.
		p.Object, p.Size = true, -1
		if size, ok := r.core.Store.BodySize(ctx, ref); ok {
			p.Size = size
		}
		return p
	}
	if p.Compound {
		parts, err := mapping.DecodeCompound(raw.Data, 0)
		if err == nil {
			p.PartCount = len(parts)
			budget := MaxPeekBody
			for i, part := range parts {
				if i == MaxPeekParts {
					p.Truncated = true
					break
				}
				if len(part.Body) > budget {
					part.Body, p.Truncated = part.Body[:budget], true
				}
				budget -= len(part.Body)
				// Copies: the parts share memory with the whole stored body.
				part.Body = append([]byte(nil), part.Body...)
				p.Parts = append(p.Parts, part)
			}
			return p
		}
		p.PartsError = err.Error()
	}
	body := raw.Data
	if len(body) > MaxPeekBody {
		body, p.Truncated = body[:MaxPeekBody], true
	}
	p.Body = append([]byte(nil), body...)
	return p
}
