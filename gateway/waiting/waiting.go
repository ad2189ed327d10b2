// Package waiting edits one queue's waiting messages by id (beyond LMQ):
// lists them without taking them (List, the list the console shows), and
// removes one (Delete) or moves it to another queue (Move). The core
// (gateway.Inspect's Messages, DeleteMessage, MoveMessage) hands them here;
// what it needs of the core (a queue's existence, the peek, a group's
// moving on, a moved message's store) comes in Config.
package waiting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/view"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// Moved is a waiting message Move stores in its target queue (the core's
// redrive store: gateway's storeMoved).
type Moved struct {
	Header   bus.Headers // the original's: the ones a moved message keeps go along
	Body     []byte      // its content (a large body loaded)
	PushedAt time.Time   // its push time, kept
	Priority int         // its priority there; < 0: the target's priority property
	Seq      uint64      // its id in the source queue: a repeated move is stored once
}

// Config is what an Editor needs of the core.
type Config struct {
	Store *store.Store
	// Shard is the handle on an existing queue's shard stream: ErrNotFound
	// when the queue does not exist.
	Shard func(ctx context.Context, queue string) (*store.Shard, error)
	// Peek is the core's view of the next waiting messages (view.Reader).
	Peek func(ctx context.Context, queue string, n int) ([]view.Peeked, error)
	// GroupHeadGone moves a group on once its head copy is gone: the
	// backlog message it stood for (backlogSeq, 0: none) goes, the next
	// becomes head.
	GroupHeadGone func(ctx context.Context, queue, group string, backlogSeq uint64) error
	// StoreMoved stores m in target, creating target when it does not
	// exist; the stream sequence of the copy (0: a duplicate).
	StoreMoved func(ctx context.Context, source, target string, m Moved) (uint64, error)
	Logger     *slog.Logger
}

// Editor lists, deletes and moves waiting messages. It holds no state
// beyond Config, so it is safe for concurrent use as far as Config's
// functions are.
type Editor struct {
	cfg Config
	log *slog.Logger
}

// New returns an Editor on cfg.
func New(cfg Config) *Editor { return &Editor{cfg: cfg, log: cfg.Logger} }

// One queue's waiting messages (beyond LMQ): listed without taking them
// (List, the list the console shows: view.Reader.Peek), removed one
// at a time by id (Delete) or moved to another queue (Move). A waiting message's id is its stream
// sequence in the queue's shard stream: stable while it waits, and what
// every gateway sharing the queue sees. A message that is released, times
// out or is respawned is stored again, so it comes back with a new id.
//
// Waiting means: on a subject a consumer of the queue reads (lmq.q, a
// priority level's lmq.p.<p>, a group's head lmq.h: mapping.WaitingOf),
// above that consumer's delivered point; or a group's backlog message
// (lmq.g) behind its group's current one. Delayed messages (schedules),
// parts of an open accumulation window and dead letters are not waiting.
//
// JetStream has no conditional delete: Delete reads the covering
// consumer's delivered point, then removes the message. A pull that the
// consumer answers with that very message between the two hands out a
// message Delete then removes (and answers 204 for): its delivery
// still works, an ack succeeds, but a release or timeout finds nothing to
// store again. The window is one JetStream round trip; the operator's
// alternative, purging, has the same one.

// List returns up to n (1..view.MaxPeek) of the queue's waiting messages in
// the order they will be delivered, without taking them (view.Reader.Peek);
// without withBody their bodies and parts are left out. ErrInvalid for n
// out of range, ErrNotFound when the queue does not exist.
func (g *Editor) List(ctx context.Context, queue string, n int, withBody bool) ([]view.Peeked, error) {
	if n < 1 || n > view.MaxPeek {
		return nil, fmt.Errorf("%w: n must be an integer from 1 to %d", store.ErrInvalid, view.MaxPeek)
	}
	ps, err := g.cfg.Peek(ctx, queue, n)
	if err != nil {
		return nil, err
	}
	if !withBody {
		for i := range ps {
			ps[i].Body, ps[i].Parts, ps[i].Truncated = nil, nil, false
		}
	}
	return ps, nil
}

// storedMessage opens queue's log and reads its message at seq:
// ErrNotFound when the queue does not exist or the message is gone.
func (g *Editor) storedMessage(ctx context.Context, queue string, seq uint64) (*store.Log, *store.StoredMsg, error) {
	if _, err := g.cfg.Shard(ctx, queue); err != nil {
		return nil, nil, err
	}
	l, err := g.cfg.Store.OpenLog(ctx, queue)
	if err != nil {
		return nil, nil, err
	}
	m, err := l.Get(ctx, seq)
	if err != nil {
		return nil, nil, err
	}
	if m == nil {
		return nil, nil, notWaiting(queue, seq, "gone")
	}
	return l, m, nil
}

// Delete removes the queue's waiting message whose id (stream
// sequence) is seq, with its Object Store body if it has one. ErrInvalid for
// seq 0; ErrNotFound when the queue does not exist, or seq is not one of its
// waiting messages: gone already, in flight (handed out and not answered),
// on another queue's subject, a dead letter, a delayed message or an
// accumulation part. For groups: removing a waiting head copy, or the
// backlog message it stands for, removes both and makes the group's next
// message its head (Config.GroupHeadGone); while that head copy is in flight both
// are ErrNotFound. A group's oldest backlog message without a head copy is
// becoming its head or has just been done with: ErrNotFound too (ask again).
func (g *Editor) Delete(ctx context.Context, queue string, seq uint64) error {
	if seq == 0 {
		return fmt.Errorf("%w: message id must be a positive integer", store.ErrInvalid)
	}
	l, m, err := g.storedMessage(ctx, queue, seq)
	if err != nil {
		return err
	}
	w, ok := mapping.WaitingOf(queue, m.Subject)
	switch {
	case !ok:
		return notWaiting(queue, seq, "not a waiting message of the queue")
	case w.Group == "":
		if err := removeWaiting(ctx, l, queue, m, w.Level); err != nil {
			return err
		}
		g.dropBodies(ctx, m)
		return nil
	case w.Head:
		return g.deleteHead(ctx, l, queue, w.Group, m)
	}
	return g.deleteBacklog(ctx, l, queue, w.Group, m)
}

// Move moves the queue's waiting message whose id (stream sequence)
// is seq into the queue target (created when it does not exist) as a new
// message there, as redrive moves a retry-exhausted one (Config.StoreMoved): its
// content, content type, kept headers and push time go along, its delivery
// count starts afresh, its priority is kept when it had one (else the
// target's priority property applies); a group message arrives ungrouped
// (the group stays in the source queue, and moves on as Delete
// makes it). The original is then removed as Delete removes it.
//
// ErrInvalid for seq 0, an invalid target or target == queue; ErrNotFound
// as for Delete (unknown queue, message gone or not waiting).
//
// The copy is stored before the original is removed, with a Nats-Msg-Id
// naming source, target and seq: a move repeated after a failure stores it
// once. When the original is handed out (or removed) between the look and
// the removal, the copy is removed again and the answer is ErrNotFound; if
// it was pulled from the target in that window, both live on (the race of
// Delete, described above, one step earlier). Any other failure of
// the removal leaves the copy in place: ask again to finish the move.
func (g *Editor) Move(ctx context.Context, queue string, seq uint64, target string) error {
	if seq == 0 {
		return fmt.Errorf("%w: message id must be a positive integer", store.ErrInvalid)
	}
	if err := store.CheckQueueName(target); err != nil {
		return err
	}
	if target == queue {
		return fmt.Errorf("%w: the target queue is the message's own queue", store.ErrInvalid)
	}
	l, m, err := g.storedMessage(ctx, queue, seq)
	if err != nil {
		return err
	}
	prio := -1
	w, ok := mapping.WaitingOf(queue, m.Subject)
	if !ok {
		return notWaiting(queue, seq, "not a waiting message of the queue")
	}
	if w.Group == "" {
		delivered, err := l.Delivered(ctx, w.Level)
		if err != nil {
			return err
		}
		if seq <= delivered {
			return notWaiting(queue, seq, "in flight")
		}
		if w.Level > 0 {
			prio = w.Level
		}
	}
	content, err := g.cfg.Store.DecodeStored(ctx, m)
	if err != nil {
		return fmt.Errorf("read message: %w", err)
	}
	pushedAt := m.Time
	if v := store.ReadStamps(m.Header).PushedAt; v > 0 {
		pushedAt = time.Unix(0, v)
	}
	copySeq, err := g.cfg.StoreMoved(ctx, queue, target, Moved{
		Header: m.Header, Body: content.Body, PushedAt: pushedAt, Priority: prio, Seq: seq,
	})
	if err != nil {
		return err
	}
	if err := g.Delete(ctx, queue, seq); err != nil {
		if errors.Is(err, store.ErrNotFound) && copySeq > 0 {
			g.unstoreCopy(ctx, target, copySeq)
		}
		return err
	}
	return nil
}

// unstoreCopy removes the copy Move stored at seq in target, with its
// Object Store body, after the original turned out not to be waiting.
func (g *Editor) unstoreCopy(ctx context.Context, target string, seq uint64) {
	tl, err := g.cfg.Store.OpenLog(ctx, target)
	if err == nil {
		var c *store.StoredMsg
		if c, err = tl.Get(ctx, seq); err == nil && c != nil {
			var removed bool
			if removed, err = tl.Remove(ctx, seq); err == nil && removed {
				g.dropBodies(ctx, c)
			}
		}
	}
	if err != nil {
		g.log.Warn("could not remove the copy of a message that was not moved", "queue", target, "seq", seq, "err", err)
	}
}

// deleteHead removes the group's head copy h if it is waiting, then moves
// the group on: the backlog message h stands for goes and the next becomes
// head (groupHeadGone; the head subject holds one copy at a time, so h goes
// first). Bodies are dropped only once the group moved on: until then the
// backlog message may still need its body (it shares h's when h's copy
// shares the reference).
func (g *Editor) deleteHead(ctx context.Context, l *store.Log, queue, group string, h *store.StoredMsg) error {
	if err := removeWaiting(ctx, l, queue, h, 0); err != nil {
		return err
	}
	backlogSeq := standsFor(h)
	var backlog *store.StoredMsg
	if backlogSeq > 0 {
		// Read before groupHeadGone removes it: its body reference.
		backlog, _ = l.Get(ctx, backlogSeq) // unreadable: its body is groupHeadGone's
	}
	if err := g.cfg.GroupHeadGone(ctx, queue, group, backlogSeq); err != nil {
		return fmt.Errorf("queue %q group %q: head copy %d removed, next message not made head: %w", queue, group, h.Seq, err)
	}
	g.dropBodies(ctx, h, backlog)
	return nil
}

// deleteBacklog removes the group's backlog message b: through its head copy
// when one stands for it, else on its own if it is behind the group's
// current message.
func (g *Editor) deleteBacklog(ctx context.Context, l *store.Log, queue, group string, b *store.StoredMsg) error {
	h, err := l.Last(ctx, mapping.HeadSubject(queue, group))
	if err != nil {
		return err
	}
	if h != nil && standsFor(h) == b.Seq {
		return g.deleteHead(ctx, l, queue, group, h)
	}
	first, err := l.Next(ctx, mapping.GroupSubject(queue, group), 1)
	if err != nil {
		return err
	}
	if first != nil && first.Seq == b.Seq {
		return notWaiting(queue, b.Seq, "its group's current message, between head copies")
	}
	removed, err := l.Remove(ctx, b.Seq)
	if err != nil {
		return err
	}
	if !removed {
		return notWaiting(queue, b.Seq, "gone")
	}
	g.dropBodies(ctx, b)
	// The message ahead of b may have been done with between the look and
	// the removal, and b's head copy stored meanwhile: it stands for a
	// message that is gone, so it goes too while it waits.
	if h, err := l.Last(ctx, mapping.HeadSubject(queue, group)); err == nil && h != nil && standsFor(h) == b.Seq {
		if err := g.deleteHead(ctx, l, queue, group, h); err != nil {
			g.log.Warn("deleted group message became head as it was deleted", "queue", queue, "group", group, "seq", b.Seq, "err", err)
		}
	}
	return nil
}

// removeWaiting removes m, a message on a subject that the consumer of
// priority level p reads, unless that consumer handed it out already (the
// race this leaves is in the file's comment).
func removeWaiting(ctx context.Context, l *store.Log, queue string, m *store.StoredMsg, p int) error {
	delivered, err := l.Delivered(ctx, p)
	if err != nil {
		return err
	}
	if m.Seq <= delivered {
		return notWaiting(queue, m.Seq, "in flight")
	}
	removed, err := l.Remove(ctx, m.Seq)
	if err != nil {
		return err
	}
	if !removed {
		return notWaiting(queue, m.Seq, "gone")
	}
	return nil
}

// dropBodies removes the Object Store bodies of removed messages (nil ones
// skipped; one body referred to twice is removed once).
func (g *Editor) dropBodies(ctx context.Context, ms ...*store.StoredMsg) {
	done := make(map[string]bool, len(ms))
	for _, m := range ms {
		if m == nil || m.Header == nil {
			continue
		}
		if ref := m.Header.Get(mapping.HdrObject); ref != "" && !done[ref] {
			done[ref] = true
			g.cfg.Store.Bodies().DeleteBody(ctx, ref)
		}
	}
}

// standsFor is the stream sequence of the backlog message a head copy
// stands for (mapping.HdrGroupSeq); 0 when it does not say.
func standsFor(h *store.StoredMsg) uint64 {
	if h.Header == nil {
		return 0
	}
	seq, err := strconv.ParseUint(strings.TrimSpace(h.Header.Get(mapping.HdrGroupSeq)), 10, 64)
	if err != nil {
		return 0
	}
	return seq
}

// notWaiting is the ErrNotFound of Delete, saying why.
func notWaiting(queue string, seq uint64, why string) error {
	return fmt.Errorf("queue %q message %d: %s: %w", queue, seq, why, store.ErrNotFound)
}
