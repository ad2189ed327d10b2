package dispatch

import (
	"context"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// A queue's consumer reads its groups' head subjects only once the queue
// has ordered groups (store/consumers.go, "Group heads", says why and the
// rules that keep every head readable). The dispatcher's part:
//
//   - making the consumer (ensureConsumer), it asks for the head subjects
//     when this gateway knows the queue has groups, or when the shard's
//     look names a backlog of the queue (or failed). The look may be up to
//     RepollInterval old: a group message stored since had its head made
//     sure of by its gateway (EnsureHeads, which makes the consumer when
//     there is none, so that the create here meets it and takes the head
//     subjects too), and one stored earlier is in the look;
//   - before the core stores a head (a group's first message, a sweep),
//     EnsureHeads makes sure of them, unless this gateway trusts that the
//     consumer reads them: it was made, found or given them, or delivered
//     a head, within headsTrust. A consumer is removed unused only after
//     mapping.ConsumerInactive without pulls and without deliveries in
//     flight, and made again without the head subjects only where the
//     queue held no group message at the look; a consumer found missing
//     ends the trust.

// headsTrust is how long a gateway that saw the queue's consumer read the
// heads goes on trusting it does, well within mapping.ConsumerInactive.
const headsTrust = mapping.ConsumerInactive - time.Minute

// noteHeadsLocked notes whether the consumer reads the heads, as seen just
// now (a write or a read of its config), trusted for headsTrust.
func (q *Queue) noteHeadsLocked(heads bool) {
	q.heads = heads
	q.headsUntil = time.Time{}
	if heads {
		q.groups = true
		q.headsUntil = time.Now().Add(headsTrust)
	}
}

// HeadServed notes that the queue's consumer delivered a group's head to
// this gateway: it reads the heads.
func (q *Queue) HeadServed() {
	q.mu.Lock()
	q.noteHeadsLocked(true)
	q.mu.Unlock()
}

// headsTrusted reports whether this gateway trusts that the queue's
// consumer reads the heads.
func (q *Queue) headsTrusted() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.heads && time.Now().Before(q.headsUntil)
}

// EnsureHeads makes sure the queue's consumer reads its groups' heads before
// the core stores one (store.EnsureHeads, which makes the consumer when
// there is none), unless this gateway trusts that it does.
func (d *Dispatcher) EnsureHeads(ctx context.Context, queue string) error {
	q := d.queues.local(queue)
	var ackWait time.Duration
	if q != nil {
		if q.headsTrusted() {
			return nil
		}
		q.mu.Lock()
		ackWait = q.ackWait
		q.mu.Unlock()
	}
	eff := d.props.Effective(queue)
	ackWait = max(ackWait, store.Backstop(eff.TimeoutDuration()))
	made, _, err := d.store.Consumers().EnsureHeads(ctx, queue, store.Limits{AckWait: ackWait, MaxInflight: eff.MaxInflight})
	if err != nil {
		return err
	}
	if q != nil {
		q.mu.Lock()
		q.ackWait = max(q.ackWait, made.AckWait)
		q.noteHeadsLocked(true)
		q.mu.Unlock()
	}
	return nil
}
