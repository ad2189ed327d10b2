// Package groups keeps the queues' ordered message groups moving (Groups):
// a group's head promoted, ended, swept and checked for staleness, on the
// core's store and dispatcher. How groups work:
//
// Ordered message groups (issue 27): the messages pushed with the same
// group to a queue are handed out one at a time, in push order; the next
// becomes deliverable only when the previous one was acked, or dropped or
// dead-lettered after its retries. A busy group holds up nothing else.
//
// How they map onto JetStream (mapping/groups.go): a grouped push is
// stored on its group's backlog subject lmq.g.<kk>.<enc>.<genc>, which no
// consumer reads. The group's current message, the oldest of its backlog,
// is copied to the group's head subject lmq.h.<kk>.<enc>.<genc>, which the
// queue's consumer reads beside the queue's own subject: to the dispatcher
// a head is one more message of the queue, handed out in the queue's
// order, nacked, timed out and counted like any other. The copy is stored
// with Nats-Expected-Last-Subject-Sequence 0, so a head subject never holds
// two messages however many gateways promote at once, and with a
// Nats-Msg-Id naming the backlog message, so a copy made twice within the
// duplicate window (a gateway that read the oldest message just before
// another finished it) is dropped. A released head (nack, timeout) is
// stored again on its head subject, expecting the original there, before
// the original goes: still the group's one head. When a head is done, the
// backlog message it stands for is removed first, then the head itself,
// then the group's next message is promoted. All of it is in JetStream, so
// every gateway sharing the queue sees the same groups, and a restart of
// a gateway or of NATS keeps them.
//
// A gateway that stops between the end of a head and the promotion of
// the next leaves the group's backlog with no head: stored, never handed
// out. The dispatcher's group sweep (gateway/dispatch/groups.go) finds
// such groups (two stream info requests per queue) when a queue's consumer
// is made while its shard shows a backlog of the queue and, while clients
// wait on a queue whose shard shows group backlogs, every 10 s; a head that JetStream hands out again after its
// AckWait (its gateway stopped) is checked against the backlog first, so
// a head whose message was already done, or that a newer copy replaced,
// is removed instead of handed out a second time.
//
// Why this way (measured, BENCHMARKS.md "Ordered groups"): JetStream has no
// per-subject limit on acks pending, so one consumer cannot hold back a
// group while serving others; a consumer per group costs ~50 KB and a Raft
// group in a cluster each; holding parked deliveries in the gateway would
// make their order and exclusivity depend on one gateway's memory. Here a
// group costs the gateway no memory at all; NATS keeps ~2.5 KB per group
// with waiting messages (10,000 groups: ~25 MB; a grouped message waiting
// ~1.2 KB against ~0.7 KB plain). A grouped push costs two JetStream
// requests more than a plain one (the read of the group's oldest, the
// head's copy; it runs at about a third of the plain rate), and ending a
// head three (the backlog's removal, the read, the next head's copy):
// pull+ack over 100 or 10,000 groups ran at about 0.3 times the plain
// queue's rate, and one group alone, one message in flight at a time, at
// ~1,200 messages/s. The number of groups a queue may hold has no bound
// of its own (the stream's subjects are the bound); every sweep lists
// them, so a queue with 10,000 groups with messages lists 10,000 subjects
// every 10 s while clients wait on it.
//
// Rules beside the others: a group's order is its push order whatever the
// priorities: a grouped push takes no priority (400), its head is handed
// out among the queue's messages of priority 0, and the queue's priority
// property does not apply to it. A grouped push takes no delay (400, as
// SQS FIFO queues take none per message) and accumulating queues take no
// groups. A group's next message joins the queue's order when it becomes
// the head, not when it was pushed.
package groups

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/gateway/pushopt"
	"github.com/lmq-gateway/lmq-gateway/internal/noise"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// Config is what Groups works with: the core's.
type Config struct {
	Store *store.Store
	// Disp is the dispatcher: it makes sure the queue's consumer reads the
	// heads, and is told of a stored head.
	Disp *dispatch.Dispatcher
	// OpContext is the context of one background operation of the core.
	OpContext func() (context.Context, context.CancelFunc)
	// AckRemove removes a pulled message (an ack: store.Ack).
	AckRemove func(ctx context.Context, r *dispatch.Raw) error
	Logger    *slog.Logger
	Noise     *noise.Limiter
}

// Groups moves the groups on. It holds no state beyond Config (all of a
// group's is in JetStream), so it is safe for concurrent use.
type Groups struct {
	cfg   Config
	store *store.Store
	disp  *dispatch.Dispatcher
	log   *slog.Logger
	noise *noise.Limiter
}

// New returns the Groups of cfg.
func New(cfg Config) *Groups {
	return &Groups{cfg: cfg, store: cfg.Store, disp: cfg.Disp, log: cfg.Logger, noise: cfg.Noise}
}

// Promote gives queue's group a head if it has none: a copy of the
// oldest message of its backlog. Waiting clients are notified when it
// stored one.
func (g *Groups) Promote(ctx context.Context, queue, group string) error {
	return g.promoteAfter(ctx, queue, group, 0)
}

// promoteAfter is Promote while the head at sequence after (0: none)
// is being ended: it is still on the head subject, and the copy is stored
// only while it is the last message there.
//
// A head is stored only while the queue's consumer reads the head subjects
// (store/consumers.go, "Group heads"): ending a head (after > 0), the
// consumer that delivered it does; otherwise the dispatcher makes sure
// first (at no cost while it trusts the consumer to).
func (g *Groups) promoteAfter(ctx context.Context, queue, group string, after uint64) error {
	m, err := g.store.Groups().GroupOldest(ctx, queue, group)
	if err != nil || m == nil {
		return err
	}
	if after == 0 {
		if err := g.disp.EnsureHeads(ctx, queue); err != nil {
			return err
		}
	}
	promoted, err := g.store.Groups().Promote(ctx, queue, group, m, after)
	if err != nil {
		return err
	}
	if promoted {
		g.disp.NotifyLevel(queue, 0)
	}
	return nil
}

// Next promotes the next message of r's group once r is removed;
// a failure leaves it to the group sweep.
func (g *Groups) Next(r *dispatch.Raw) {
	if r.Group == "" {
		return
	}
	ctx, cancel := g.cfg.OpContext()
	defer cancel()
	if err := g.Promote(ctx, r.Queue().Name(), r.Group); err != nil {
		g.log.Warn("could not hand out the group's next message; the group sweep will",
			"queue", r.Queue().Name(), "group", r.Group, "err", err)
	}
}

// End begins the end of r, a group's head (nothing for other
// messages): the backlog message it stands for is removed, then the group's
// next message is copied to the head subject while r is still there (the
// copy expects r to be the last message on it). Then the caller removes r
// (an ack), and calls Next only when End said the next head was
// not stored (advanced false: a failure, which Next tries again).
//
// Why the next head before r's removal (BENCHMARKS.md "Ordered groups"):
// a group drained alone has its head as the only message of the stream's
// last block; removing it first emptied that block, and the file store
// started a new block for every message, each kept for its tombstones:
// draining one group of 20,000 messages took the process to 1.1 GiB and
// ~800 µs of CPU per message. The next head stored first keeps the last
// block from emptying.
func (g *Groups) End(ctx context.Context, r *dispatch.Raw) (advanced bool, err error) {
	if r.Group == "" {
		return true, nil
	}
	queue := r.Queue().Name()
	if r.GroupSeq > 0 {
		if err := g.store.Groups().Remove(ctx, queue, r.GroupSeq); err != nil {
			return false, err
		}
	}
	if err := g.promoteAfter(ctx, queue, r.Group, r.Seq); err != nil {
		g.log.Debug("could not store the group's next head before ending this one", "queue", queue, "group", r.Group, "err", err)
		return false, nil
	}
	return true, nil
}

// Stale reports whether r, a group's head, must not be delivered: a
// newer copy replaced it (a release stored the copy and its gateway stopped
// before removing the original, which comes back after its AckWait, or at
// once when NATS restarted and the consumer was made anew: handed out, the
// two would be two deliveries of one group at once), or, for one JetStream
// handed out again (DC > 1), the backlog message it stands for is gone (it
// was done, or deleted). The first costs a request per grouped delivery,
// the price of "never two at once" across crashes.
func (g *Groups) Stale(ctx context.Context, r *dispatch.Raw) bool {
	queue := r.Queue().Name()
	if r.DC > 1 && r.GroupSeq > 0 {
		if has, err := g.store.Groups().Has(ctx, queue, r.GroupSeq); err == nil && !has {
			return true
		}
	}
	last, err := g.store.Groups().LastOn(ctx, queue, r.Msg.Subject)
	return err == nil && last > r.Seq
}

// DropStale removes a stale head (Stale) without counting it anywhere,
// and gives its group a head if it has none.
func (g *Groups) DropStale(r *dispatch.Raw) {
	ctx, cancel := g.cfg.OpContext()
	defer cancel()
	if err := g.cfg.AckRemove(ctx, r); err != nil {
		g.log.Warn("could not remove a stale group head", "queue", r.Queue().Name(), "group", r.Group, "err", err)
		return
	}
	g.Next(r)
}

// Sweep gives a head to each of queue's groups that has a backlog
// and no head (the core's dispatch.Rules.Groups) and reports whether the queue has
// group backlogs.
func (g *Groups) Sweep(queue string) bool {
	ctx, cancel := g.cfg.OpContext()
	defer cancel()
	stranded, any, err := g.store.Groups().StrandedGroups(ctx, queue)
	if err != nil {
		if n, ok := g.noise.Allow("group sweep failed"); ok {
			g.log.Warn("looking for groups without a head failed; the next sweep looks again", "queue", queue, "err", err, "suppressed", n)
		}
		return any
	}
	if any {
		// Heads stored by older gateways while the consumer did not read
		// them are stored again (store.EnsureHeads).
		if err := g.disp.EnsureHeads(ctx, queue); err != nil {
			g.log.Warn("could not make sure the queue's consumer reads its groups' heads", "queue", queue, "err", err)
			return any
		}
	}
	for _, group := range stranded {
		if err := g.Promote(ctx, queue, group); err != nil {
			g.log.Warn("could not hand out a group's next message", "queue", queue, "group", group, "err", err)
		}
	}
	return any
}

// PushSubject checks a grouped push's options and returns the subject
// it is stored on.
func PushSubject(queue string, opts pushopt.Options) (string, error) {
	if err := mapping.ValidateGroup(opts.Group); err != nil {
		return "", fmt.Errorf("%w: %w", store.ErrInvalid, err)
	}
	if opts.Delay > 0 {
		return "", fmt.Errorf("%w: a message in a group takes no delay", store.ErrInvalid)
	}
	if opts.Priority != nil {
		return "", fmt.Errorf("%w: a message in a group takes no priority: a group's order is its push order", store.ErrInvalid)
	}
	return mapping.GroupSubject(queue, opts.Group), nil
}

// HeadGone ends the current message of the queue's group whose head
// copy was removed without a delivery (DELETE of one waiting message): the
// backlog message it stood for (backlogSeq; 0 when unknown) is removed and
// the group's next message becomes its head.
func (g *Groups) HeadGone(ctx context.Context, queue, group string, backlogSeq uint64) error {
	if backlogSeq > 0 {
		if err := g.store.Groups().Remove(ctx, queue, backlogSeq); err != nil {
			return err
		}
	}
	return g.Promote(ctx, queue, group)
}
