// Package qlog holds a queue's stream as those who move stored messages
// see it, below the level of deliveries: its entries (accumulation parts
// and deliverable messages, where they are and what they are tagged with)
// and the reading and trimming of the stream (QueueLog). The accumulator,
// upgrade and migrate use it through package gateway, which aliases Entry
// and QueueLog.
//
// It is apart from package gateway because it needs only the store: an
// entry's content stays opaque to its users (the store reads it back, with
// the functions here that take the store, which only the core holds). It
// imports neither package gateway nor nats.go.
package qlog

import (
	"context"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// Entry is a message in a queue's stream as the accumulator and migrate see
// it: where it is and what it is tagged with. Its content stays with the
// core (Content).
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
	msg   *bus.Msg
}

func newEntry(queue string, rm *store.StoredMsg) *Entry {
	return &Entry{
		Seq:    rm.Seq,
		Window: rm.Header.Get(mapping.HdrWindow),
		Origin: rm.Header.Get(mapping.HdrMigrated),
		Time:   rm.Time,
		queue:  queue,
		msg:    &bus.Msg{Subject: rm.Subject, Header: rm.Header, Data: rm.Data},
	}
}

// EncodePart prepares c as a part of an accumulation window of queue
// (store.Encode on mapping.PartSubject): a large body goes to the Object
// Store now, once, however often StorePart is tried.
func EncodePart(ctx context.Context, st *store.Store, queue string, c store.Content, retry int) (*Entry, error) {
	m, err := st.Encode(ctx, queue, mapping.PartSubject(queue), c, retry)
	if err != nil {
		return nil, err
	}
	return &Entry{queue: queue, msg: m}, nil
}

// StorePart stores part, tagged with window, in the stream of the queue
// stream (its name as bound) and sets its Seq and Window.
func StorePart(ctx context.Context, st *store.Store, stream string, part *Entry, window string) error {
	part.msg.Header.Set(mapping.HdrWindow, window)
	part.Window = window
	var err error
	part.Seq, err = st.Publish(ctx, "store part", stream, part.msg)
	return err
}

// Queue is the name of the entry's queue.
func Queue(e *Entry) string { return e.queue }

// Content reads back the content of an entry.
func Content(ctx context.Context, st *store.Store, e *Entry) (store.Content, error) {
	return st.Decode(ctx, e.msg)
}

// DropBody removes the Object Store body of an entry, if it has one.
func DropBody(ctx context.Context, st *store.Store, e *Entry) { st.Bodies().DropBody(ctx, e.msg) }

// QueueLog reads and trims one queue's stream below the level of
// deliveries, for the accumulator's and migrate's bookkeeping (store.Log).
type QueueLog struct {
	queue string
	log   *store.Log
}

// Open is the QueueLog of queue over log, its stream opened by the store.
func Open(queue string, log *store.Log) *QueueLog { return &QueueLog{queue: queue, log: log} }

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
