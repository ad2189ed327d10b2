package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/message"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Copy is a message stored as it is, outside the push path's rules (no
// accumulation, the retry given here rather than the queue's): the compounds
// the accumulator builds, and messages `lmq-gateway migrate` copies from an
// old LMQ.
type Copy struct {
	// Message is the content of a normal message; ignored when Parts is set.
	Message Message
	// Parts, when not nil, make it a compound message (parts in order).
	Parts []Message
	// Retry is the message's retry count, what its first delivery starts from.
	Retry int
	// PushedAt, when not zero, is the push time it reports (for retention);
	// zero means now.
	PushedAt time.Time
	// Window, when set, tags it with an accumulation window
	// (mapping.HdrWindow), so that QueueLog.NextQueued can find it again.
	Window string
	// Origin, when set, is stamped as mapping.HdrMigrated: the LMQ delivery
	// id it was copied from.
	Origin string
	// Create makes the queue when it does not exist; without it the store
	// fails with ErrNotFound then.
	Create bool
	// Priority is the copy's priority (0..mapping.MaxPriority); a compound
	// (Parts) with 0 gets the queue's priority property.
	Priority int
}

// StoreCopy stores c among queue's deliverable messages and returns its
// stream sequence. Its errors are Push's: ErrUnknown when the message may be
// stored (look for it before storing it again), ErrUnavailable when it
// certainly is not. It does not wake waiting clients (see Notify), nor count
// a push for statistics.
func (g *Logs) StoreCopy(ctx context.Context, queue string, c Copy) (seq uint64, err error) {
	if err := validName(queue); err != nil {
		return 0, err
	}
	q, err := g.disp.Bind(ctx, queue, c.Create)
	if err != nil {
		return 0, err
	}
	content := c.Message
	if c.Parts != nil {
		body, err := EncodeCompound(c.Parts)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		content = Message{Body: body}
	}
	prio := c.Priority
	if err := mapping.CheckPriority(int64(prio)); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if c.Parts != nil && prio == 0 {
		prio = g.props.Effective(queue).Priority
	}
	m, err := g.store.Encode(ctx, queue, mapping.PrioritySubject(queue, prio), message.Content(content), c.Retry)
	if err != nil {
		return 0, err
	}
	if prio > 0 {
		m.Header.Set(mapping.HdrPriority, strconv.Itoa(prio))
	}
	if c.Parts != nil {
		m.Header.Set(mapping.HdrKind, mapping.KindCompound)
	}
	if !c.PushedAt.IsZero() {
		m.Header.Set(mapping.HdrPushedAt, strconv.FormatInt(c.PushedAt.UnixNano(), 10))
	}
	// No Nats-Msg-Id for either tag: the core re-publishes a released
	// message with its headers, and JetStream would drop that copy as a
	// duplicate.
	if c.Window != "" {
		m.Header.Set(mapping.HdrWindow, c.Window)
	}
	if c.Origin != "" {
		m.Header.Set(mapping.HdrMigrated, c.Origin)
	}
	seq, err = g.store.Publish(ctx, "store message", q.Name(), m)
	if err != nil {
		if !errors.Is(err, ErrUnknown) {
			g.store.Bodies().DropBody(ctx, m) // certainly not stored (see PushWith)
		}
		return 0, err
	}
	return seq, nil
}
