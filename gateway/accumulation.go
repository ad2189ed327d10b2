package gateway

import (
	"context"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/message"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// Accumulator stores pushes to accumulating queues (accum > 0) as parts of a
// window and, when the window closes, stores them as one compound message
// (StoreCopy) and calls Gateway.Notify.
type Accumulator interface {
	// Push adds msg to queue's open window, opening one of length accum (with
	// the message retry fixed now) when none is open. The queue's stream
	// exists when it is called. It answers AccumNew or AccumYes.
	Push(ctx context.Context, queue string, accum time.Duration, retry int, msg Message) (AccumState, error)
}

// Entry is a message in a queue's stream as the accumulator and migrate see
// it: where it is and what it is tagged with. Its content stays with the
// core (PartContent).
type Entry struct {
	// Seq is its stream sequence; 0 for a part not stored yet.
	Seq uint64
	// Window is the accumulation window it is tagged with (mapping.HdrWindow).
	Window string
	// Origin is the LMQ delivery id it was migrated from (mapping.HdrMigrated).
	Origin string
	// Time is when JetStream stored it.
	Time time.Time

	queue string
	msg   *store.Msg
}

func newEntry(queue string, rm *store.StoredMsg) *Entry {
	return &Entry{
		Seq:    rm.Seq,
		Window: rm.Header.Get(mapping.HdrWindow),
		Origin: rm.Header.Get(mapping.HdrMigrated),
		Time:   rm.Time,
		queue:  queue,
		msg:    &store.Msg{Subject: rm.Subject, Header: rm.Header, Data: rm.Data},
	}
}

// EncodePart prepares msg as a part of an accumulation window of queue: a
// large body goes to the Object Store now, once, however often StorePart is
// tried. When no window takes the part, DropBody removes that body.
func (g *Parts) EncodePart(ctx context.Context, queue string, msg Message, retry int) (*Entry, error) {
	m, err := g.store.Encode(ctx, queue, mapping.PartSubject(queue), message.Content(msg), retry)
	if err != nil {
		return nil, err
	}
	return &Entry{queue: queue, msg: m}, nil
}

// StorePart stores part, tagged with window, in its queue's stream (on
// mapping.PartSubject, which no consumer reads) and sets its Seq and Window.
// Its errors are Push's: ErrUnknown when the part may be stored.
func (g *Parts) StorePart(ctx context.Context, part *Entry, window string) error {
	q, err := g.disp.Bind(ctx, part.queue, true)
	if err != nil {
		return err
	}
	part.msg.Header.Set(mapping.HdrWindow, window)
	part.Window = window
	part.Seq, err = g.store.Publish(ctx, "store part", q.Name(), part.msg)
	return err
}

// PartContent reads back the content of a part (QueueLog.NextPart).
func (g *Parts) PartContent(ctx context.Context, part *Entry) (Message, error) {
	return message.Decoded(g.store.Decode(ctx, part.msg))
}

// DropBody removes the Object Store body of an entry, if it has one: for a
// part no window took, or parts whose compound message is stored.
func (g *Parts) DropBody(ctx context.Context, e *Entry) { g.store.DropBody(ctx, e.msg) }

// QueueLog reads and trims one queue's stream below the level of
// deliveries, for the accumulator's and migrate's bookkeeping (store.Log).
type QueueLog struct {
	queue string
	log   *store.Log
}

// QueueLog opens queue's stream; the error wraps ErrNotFound when it does not
// exist.
func (g *Logs) QueueLog(ctx context.Context, queue string) (*QueueLog, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if _, err := g.queueShard(ctx, queue); err != nil {
		return nil, err
	}
	log, err := g.store.OpenLog(ctx, queue)
	if err != nil {
		return nil, err
	}
	return &QueueLog{queue: queue, log: log}, nil
}

// LastSeq is the stream's last sequence when QueueLog opened it (its
// leader's answer).
func (l *QueueLog) LastSeq() uint64 { return l.log.LastSeq() }

// NextPart is the first accumulation part at or after sequence from; nil
// when there is none.
func (l *QueueLog) NextPart(ctx context.Context, from uint64) (*Entry, error) {
	return l.next(ctx, mapping.PartSubject(l.queue), from)
}

// NextQueued is the first deliverable message at or after sequence from; nil
// when there is none.
func (l *QueueLog) NextQueued(ctx context.Context, from uint64) (*Entry, error) {
	return l.next(ctx, mapping.QueueSubject(l.queue), from)
}

func (l *QueueLog) next(ctx context.Context, subject string, from uint64) (*Entry, error) {
	rm, err := l.log.Next(ctx, subject, from)
	if rm == nil || err != nil {
		return nil, err
	}
	return newEntry(l.queue, rm), nil
}

// Has reports whether the stream still holds sequence seq.
func (l *QueueLog) Has(ctx context.Context, seq uint64) (bool, error) { return l.log.Has(ctx, seq) }

// Delete removes the message at seq (not its Object Store body: DropBody);
// one already gone is fine.
func (l *QueueLog) Delete(ctx context.Context, seq uint64) error { return l.log.Delete(ctx, seq) }

// PurgeParts removes every accumulation part up to and including sequence
// through, in one request.
func (l *QueueLog) PurgeParts(ctx context.Context, through uint64) error {
	return l.log.PurgeParts(ctx, through)
}
