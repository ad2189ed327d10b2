package view

import (
	"context"
	"fmt"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
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
	// Group is the message's ordered group ("" for none): a group's head
	// copy or one of its backlog messages (mapping/groups.go).
	Group string
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
// strictly so, gateway/dispatch/priority.go), and within a level the level's
// subjects from just after the last message its consumer handed out (from
// the start when the level has no consumer), by direct "next by subject"
// reads. Level 0's consumer reads the queue's subject and its groups' head
// subjects (mapping/groups.go): their messages are merged by stream
// sequence, which is the order the consumer hands them out in. After the
// levels come the groups' backlog messages behind their group's current
// one (peekBacklog): each is delivered only after the one before it in its
// group is done. Messages handed out and not yet answered are not shown,
// so a message whose delivery timed out in place may be missing until it is
// handed out again; delayed messages (schedules) and parts of an open
// accumulation window are not waiting yet and not shown. store.ErrNotFound
// when the queue does not exist.
func (r *Reader) Peek(ctx context.Context, queue string, n int) ([]Peeked, error) {
	n = min(max(n, 0), MaxPeek)
	sh, err := r.core.Shard(ctx, queue)
	if err != nil {
		return nil, err
	}
	levels, err := waitingLevels(ctx, sh, queue)
	if err != nil {
		return nil, err
	}
	out := make([]Peeked, 0, n)
	for _, p := range levels {
		if len(out) == n {
			break
		}
		from, err := levelFrom(ctx, sh, queue, p)
		if err != nil {
			return out, err
		}
		ps, err := r.peekMerged(ctx, sh, mapping.LevelSubjects(queue, p), from, n-len(out))
		out = append(out, ps...)
		if err != nil {
			return out, err
		}
	}
	if len(out) < n {
		ps, err := r.peekBacklog(ctx, sh, queue, n-len(out))
		out = append(out, ps...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// MaxBacklogScan bounds the groups' backlog messages one Peek reads to find
// those it lists: it skips each group's current message (one read per
// group that has one), so a queue with more groups than this whose current
// messages come first in the stream shows a shorter list than it could.
// A look must not cost a read per group of a queue with very many.
const MaxBacklogScan = 4096

// peekBacklog returns up to n of the queue's groups' backlog messages that
// are not their group's current one, in stream order: the order in which
// they become their group's head, as far as one group's order goes (when
// each is handed out then depends on the other groups and on the queue).
// A group's current message is the oldest of its backlog: the one its head
// copy stands for (listed as that copy, at level 0, or in flight), or, for
// an instant, one whose copy is being stored or whose group just finished
// with it. Either way it is not listed here.
func (r *Reader) peekBacklog(ctx context.Context, sh *store.Shard, queue string, n int) ([]Peeked, error) {
	backlogs, err := sh.SubjectCounts(ctx, mapping.GroupWildcard(queue))
	if err != nil {
		return nil, fmt.Errorf("peek: %w", err)
	}
	// Messages behind their group's current one, now: no scan when there
	// are none, and none beyond the last of them.
	var behind uint64
	for _, c := range backlogs {
		if c > 1 {
			behind += c - 1
		}
	}
	n = int(min(uint64(max(n, 0)), behind))
	out := make([]Peeked, 0, n)
	seen := make(map[string]bool)
	from := uint64(1)
	for reads := 0; len(out) < n && reads < MaxBacklogScan; reads++ {
		raw, err := sh.Next(ctx, mapping.GroupWildcard(queue), from)
		if err != nil {
			return out, fmt.Errorf("peek: %w", err)
		}
		if raw == nil {
			break
		}
		from = raw.Seq + 1
		if !seen[raw.Subject] {
			seen[raw.Subject] = true // the group's current message
			continue
		}
		out = append(out, r.peeked(ctx, raw))
	}
	return out, nil
}

// OldestWaiting returns when the oldest of the queue's next waiting
// messages was pushed: the earliest push time among the heads of its
// priority levels (Peek's first message is the highest priority's, which
// need not be the one waiting longest). Zero when none is waiting or its
// push time is unknown; store.ErrNotFound when the queue does not exist.
func (r *Reader) OldestWaiting(ctx context.Context, queue string) (time.Time, error) {
	sh, err := r.core.Shard(ctx, queue)
	if err != nil {
		return time.Time{}, err
	}
	levels, err := waitingLevels(ctx, sh, queue)
	if err != nil {
		return time.Time{}, err
	}
	var oldest time.Time
	for _, p := range levels {
		from, err := levelFrom(ctx, sh, queue, p)
		if err != nil {
			return time.Time{}, err
		}
		ps, err := r.peekMerged(ctx, sh, mapping.LevelSubjects(queue, p), from, 1)
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
func waitingLevels(ctx context.Context, sh *store.Shard, queue string) ([]int, error) {
	counts, err := sh.SubjectCounts(ctx, mapping.PriorityWildcard(queue))
	if err != nil {
		return nil, fmt.Errorf("peek: %w", err)
	}
	levels := make([]int, 0, 2)
	for p := mapping.MaxPriority; p >= 1; p-- {
		if counts[mapping.PrioritySubject(queue, p)] > 0 {
			levels = append(levels, p)
		}
	}
	return append(levels, 0), nil
}

// levelFrom is the stream sequence from which level p's waiting messages
// start: just after the last one its consumer handed out, 1 when the level
// has no consumer (none made yet, or removed unused: then nothing of it is
// in flight).
func levelFrom(ctx context.Context, sh *store.Shard, queue string, p int) (uint64, error) {
	name := mapping.ConsumerName(queue)
	if p > 0 {
		name = mapping.PriorityConsumerName(queue, p)
	}
	c, found, err := sh.Consumer(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("peek: %w", err)
	}
	if !found {
		return 1, nil
	}
	return c.Delivered + 1, nil
}

// PeekDead returns up to n (at most MaxPeek) of the queue's oldest dead
// letters, without removing them; DiedAt and Delivered say when they died
// and after how many deliveries. store.ErrNotFound when the queue does not exist.
func (r *Reader) PeekDead(ctx context.Context, queue string, n int) ([]Peeked, error) {
	n = min(max(n, 0), MaxPeek)
	sh, err := r.core.Shard(ctx, queue)
	if err != nil {
		return nil, err
	}
	return r.peekMerged(ctx, sh, []string{mapping.DeadSubject(queue)}, 1, n)
}

// peekMerged reads up to n messages of subjects (wildcards allowed) from
// stream sequence from on, merged by sequence: one direct "next by subject"
// read per subject to start, then one per message returned.
func (r *Reader) peekMerged(ctx context.Context, sh *store.Shard, subjects []string, from uint64, n int) ([]Peeked, error) {
	out := make([]Peeked, 0, n)
	if n <= 0 {
		return out, nil
	}
	next := make([]*store.StoredMsg, len(subjects))
	read := func(i int, from uint64) error {
		raw, err := sh.Next(ctx, subjects[i], from)
		if err != nil {
			return fmt.Errorf("peek: %w", err)
		}
		next[i] = raw // nil: none left
		return nil
	}
	for i := range subjects {
		if err := read(i, from); err != nil {
			return out, err
		}
	}
	for len(out) < n {
		first := -1
		for i, m := range next {
			if m != nil && (first < 0 || m.Seq < next[first].Seq) {
				first = i
			}
		}
		if first < 0 {
			break
		}
		m := next[first]
		out = append(out, r.peeked(ctx, m))
		if len(out) == n {
			break
		}
		if err := read(first, m.Seq+1); err != nil {
			return out, err
		}
	}
	return out, nil
}

// peeked decodes one stored message for Peek, within its bounds.
func (r *Reader) peeked(ctx context.Context, raw *store.StoredMsg) Peeked {
	h := raw.Header // a nil one reads as empty
	s := store.ReadStamps(h)
	p := Peeked{
		Seq:         raw.Seq,
		Priority:    store.MessagePriority(raw.Subject, h),
		ContentType: h.Get(mapping.HdrContentType),
		Retry:       s.Retry,
		Delivered:   s.Delivered,
		Size:        int64(len(raw.Data)),
		Compound:    h.Get(mapping.HdrKind) == mapping.KindCompound,
		Group:       messageGroup(raw.Subject, h),
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
		if size, ok := r.core.Store.Bodies().BodySize(ctx, ref); ok {
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

// messageGroup is the group of a stored message: its header, or failing
// that (anyone may publish on a group's subjects) its subject's; "" for
// none.
func messageGroup(subject string, h bus.Headers) string {
	if g := h.Get(mapping.HdrGroup); g != "" && mapping.ValidateGroup(g) == nil {
		return g
	}
	g, _ := mapping.GroupFromSubject(subject)
	return g
}
