package gateway

import (
	"context"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/message"
	"github.com/lmq-gateway/lmq-gateway/gateway/qlog"
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
// it (qlog.Entry): where it is and what it is tagged with. Its content
// stays with the core (PartContent).
type Entry = qlog.Entry

// QueueLog reads and trims one queue's stream below the level of
// deliveries, for the accumulator's and migrate's bookkeeping
// (qlog.QueueLog).
type QueueLog = qlog.QueueLog

// EncodePart prepares msg as a part of an accumulation window of queue: a
// large body goes to the Object Store now, once, however often StorePart is
// tried. When no window takes the part, DropBody removes that body.
func (g *Parts) EncodePart(ctx context.Context, queue string, msg Message, retry int) (*Entry, error) {
	return qlog.EncodePart(ctx, g.store, queue, message.Content(msg), retry)
}

// StorePart stores part, tagged with window, in its queue's stream (on
// mapping.PartSubject, which no consumer reads) and sets its Seq and Window.
// Its errors are Push's: ErrUnknown when the part may be stored.
func (g *Parts) StorePart(ctx context.Context, part *Entry, window string) error {
	q, err := g.disp.Bind(ctx, qlog.Queue(part), true)
	if err != nil {
		return err
	}
	return qlog.StorePart(ctx, g.store, q.Name(), part, window)
}

// PartContent reads back the content of a part (QueueLog.NextPart).
func (g *Parts) PartContent(ctx context.Context, part *Entry) (Message, error) {
	return message.Decoded(qlog.Content(ctx, g.store, part))
}

// DropBody removes the Object Store body of an entry, if it has one: for a
// part no window took, or parts whose compound message is stored.
func (g *Parts) DropBody(ctx context.Context, e *Entry) { qlog.DropBody(ctx, g.store, e) }

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
	return qlog.Open(queue, log), nil
}
