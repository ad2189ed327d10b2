package gateway

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/gateway/inflight"
	"github.com/lmq-gateway/lmq-gateway/gateway/message"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// replyTimeout bounds the work on one reply (ack, nack, ext) of a client,
// whatever NATS does meanwhile; an ack that runs out of it is answered
// ErrUnknown.
const replyTimeout = 5 * time.Second

// deliver turns a message JetStream handed over into a delivery: fresh id,
// timer from the queue's current timeout.
func (g *core) deliver(ctx context.Context, r *dispatch.Raw) (*Delivery, error) {
	q := r.Queue()
	msg, err := message.Decoded(g.store.Decode(ctx, &r.Msg))
	if store.BodyLost(err) {
		// The message names a large-message body that is not stored (or not
		// readable): put back, it would fail every pull again. It is handed
		// out as stored, without that body, so the client can see and ack it.
		g.log.Warn("large-message body not found; delivering the message without it",
			"queue", q.Name(), "seq", r.Seq, "object", r.Msg.Header.Get(mapping.HdrObject), "err", err)
		stripped := r.Msg
		stripped.Header = make(bus.Headers, len(r.Msg.Header))
		for k, v := range r.Msg.Header {
			if k != mapping.HdrObject {
				stripped.Header[k] = v
			}
		}
		msg, err = message.Decoded(g.store.Decode(ctx, &stripped))
	}
	if err != nil {
		g.spawn(func(context.Context) { g.rel.Release(r, false) })
		return nil, err
	}
	if r.Group != "" {
		q.HeadServed() // its consumer reads the heads (package groups)
	}
	if r.Group != "" && g.groups.Stale(ctx, r) {
		// Done or replaced meanwhile (package groups): not a message any more.
		g.spawn(func(context.Context) { g.groups.DropStale(r) })
		return nil, nil
	}
	out := &Delivery{Queue: q.Name(), RetryRemaining: r.Retry + 1 - r.Used(), Priority: r.Level, Group: r.Group,
		Seq: r.Seq, Receives: receives(r)}
	r.Receives = out.Receives
	if r.PushedAt > 0 {
		out.PushedAt = time.Unix(0, r.PushedAt)
	}
	if ns, err := strconv.ParseInt(r.Msg.Header.Get(mapping.HdrFirstReceived), 10, 64); err == nil && ns > 0 {
		r.FirstReceived = ns
	} else {
		r.FirstReceived = time.Now().UnixNano()
	}
	out.FirstReceivedAt = time.Unix(0, r.FirstReceived)
	out.Message = msg
	if r.Msg.Header.Get(mapping.HdrKind) == mapping.KindCompound {
		// What comes back from the stream is input too: anyone who can publish
		// on the queue subject can store any body with this header. One that
		// does not decode is handed out as a plain message with its body as
		// stored, so nothing is lost, the client gets an answer and can ack
		// it, and the queue is not stuck on it.
		if parts, err := DecodeCompound(msg.Body, 0); err != nil {
			g.log.Warn("compound message does not decode; delivering it as a plain message",
				"queue", q.Name(), "seq", r.Seq, "bytes", len(msg.Body), "err", err)
		} else {
			out.Compound, out.Parts, out.Message = true, parts, Message{}
		}
	}
	eff := g.props.Effective(q.Name())
	timeout := eff.TimeoutDuration()
	out.releaseOnDisconnect = eff.ReleaseOnDisconnect // releaseconn.go
	if err := g.disp.EnsureAckWait(ctx, q, timeout); err != nil {
		g.spawn(func(context.Context) { g.rel.Release(r, false) })
		return nil, err
	}
	now := time.Now()
	d := inflight.NewEntry(inflight.NewID(g.idPfx), r, clientOf(ctx), now, now.Add(timeout))
	out.ID, out.ref = d.ID, d
	if r.PushedAt > 0 {
		g.obs.Pulled(q.Name(), time.Since(time.Unix(0, r.PushedAt)))
	}
	if timeout <= 0 {
		// Available again at once: the next pull gets it with one retry less,
		// and this id is dead before the client sees it.
		d.Finish()
		g.rel.Release(r, true)
		return out, nil
	}
	// An in-flight message does not keep its body in memory (thousands may be
	// in flight): a release reads it back from the stream.
	r.Msg.Data, r.BodyGone = nil, true
	g.dels.Add(d)
	// The timer's goroutine counts itself, and does nothing once the gateway
	// is closing (the delivery stays pending in JetStream, see Close).
	d.Arm(timeout, func() { g.within(func(context.Context) { g.expire(d) }) })
	return out, nil
}

// receives is how many times r's message was handed to clients, this
// delivery included: the count its earlier copies carry (Lmq-Receives, else
// the retries they used) plus this copy's JetStream deliveries.
func receives(r *dispatch.Raw) int {
	before := r.Prev
	if n, err := strconv.Atoi(r.Msg.Header.Get(mapping.HdrReceives)); err == nil && n >= 0 {
		before = n
	}
	return before + r.DC
}

// take moves an active delivery to finished and out of the table; false if it
// was not active (already answered, expired or being acked).
func (g *core) take(d *inflight.Entry) bool {
	if !d.Finish() {
		return false
	}
	g.dels.Del(d.ID)
	return true
}

// expire releases a delivery whose timeout passed. It stays counted in
// flight until its copy is stored: no client waits on a timer's release,
// so InFlight (lmq_deliveries_in_flight, the queue's in_flight) is what
// tells a watcher that the message is back in its queue; counted out
// before, a release by a client just after could store its copy first and
// put its message ahead of this one.
func (g *core) expire(d *inflight.Entry) {
	// Finished (a reply to it now finds it so) but left in the table.
	if !d.Finish() {
		return
	}
	q := d.Queue()
	// Deferred first, so it fires last: once the delivery is out of InFlight.
	defer g.testTimedOut.Signal(TimedOutDelivery{Queue: q, ID: d.ID})
	defer g.dels.Del(d.ID)
	g.obs.TimedOut(q)
	g.rel.Release(d.Raw, true)
}

// Abandon gives back a delivery the front end could not hand to its client (the
// client went away): the message is available again at once and the delivery
// does not count as a retry.
func (g *Messages) Abandon(_ context.Context, d *Delivery) {
	if d == nil || d.ref == nil {
		return
	}
	if g.take(d.ref) {
		g.rel.Release(d.ref.Raw, false)
	}
}

// ackRemove acks the JetStream message, which removes it from the WorkQueue
// stream, and waits for JetStream's answer.
func (g *core) ackRemove(ctx context.Context, r *dispatch.Raw) error {
	return g.store.Ack(ctx, &r.Msg)
}

// Reply applies a client's ack, nack or ext to the delivery id of queue.
// Unknown, superseded or expired ids give ErrNotFound.
func (g *Messages) Reply(ctx context.Context, queue, id string, kind ReplyKind) error {
	if err := validName(queue); err != nil {
		return err
	}
	d := g.dels.Get(id)
	if d == nil {
		if g.acked.Has(id) {
			return fmt.Errorf("delivery %s: %w", id, ErrAlreadyAcked)
		}
		return g.relayReply(ctx, queue, id, kind, 0)
	}
	if d.Queue() != queue {
		return fmt.Errorf("delivery %s in queue %q: %w", id, queue, ErrNotFound)
	}
	return g.replyLocal(ctx, d, kind)
}

func (g *core) replyLocal(ctx context.Context, d *inflight.Entry, kind ReplyKind) error {
	// Made only when answered (every successful ack would pay for it).
	notFound := func() error { return inflight.NotFound(d.ID) }
	q := d.Raw.Queue()
	switch kind {
	case Ack:
		if !d.BeginAck(time.Now()) {
			return notFound()
		}
		gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), replyTimeout)
		advanced, err := g.groups.End(gctx, d.Raw)
		gcancel()
		if err != nil {
			// (Its backlog message first: a head acked without it would
			// be handed out again as the group's next, package groups.)
			d.AbortAck(time.Now())
			return store.Outcome("ack", err)
		}
		// The ack is bounded by its own deadline, not the client's: a client
		// that leaves mid-ack still gets its ack applied, and one that waits
		// gets an answer within replyTimeout even when the NATS node under
		// this gateway died with the request in flight. (A request with a
		// timeout rather than a context: no context and timer made per ack.)
		if err := g.store.AckWithin(&d.Raw.Msg, replyTimeout); err != nil {
			if d.AbortAck(time.Now()) {
				g.expire(d)
			}
			return store.Outcome("ack", err)
		}
		d.EndAck()
		g.dels.Del(d.ID)
		g.acked.Add(d.ID)
		// DropBody runs on its own deadline, whatever ctx does.
		g.store.Bodies().DropBody(ctx, &d.Raw.Msg)
		if !advanced {
			g.groups.Next(d.Raw)
		}
	case Nack:
		if d.Expired(time.Now()) || !g.take(d) {
			return notFound()
		}
		g.nackRelease(d.Raw)
	case Ext:
		timeout := g.props.Effective(q.Name()).TimeoutDuration()
		ectx, cancel := context.WithTimeout(ctx, replyTimeout)
		defer cancel()
		if err := g.disp.EnsureAckWait(ectx, q, timeout); err != nil {
			return err
		}
		if !d.Extend(time.Now(), timeout) {
			return notFound()
		}
		// Restart JetStream's backstop clock as well.
		if err := g.store.Progress(&d.Raw.Msg); err != nil {
			return jsErr("ext", err)
		}
	default:
		return fmt.Errorf("%w: reply %v", ErrInvalid, kind)
	}
	g.obs.Replied(q.Name(), kind)
	return nil
}

// nackRelease puts a nacked message back, waiting at most replyTimeout for
// it: the release itself may take up to opTimeout when the stream has no
// leader (an election), and a client's nack must be answered within the
// bound every other request keeps. Past replyTimeout the release goes on in
// the background; the answer is the same 204 either way, since a release
// that fails leaves the message to come back after JetStream's backstop
// AckWait (release logs it), which is what a nack that is not answered in
// time amounts to as well. In the usual case the release is done before the
// answer, so a client's next pull sees the message where LMQ puts it.
func (g *core) nackRelease(r *dispatch.Raw) {
	done := make(chan struct{})
	if !g.spawn(func(context.Context) {
		defer close(done)
		g.rel.Release(r, true)
	}) {
		g.rel.Release(r, true) // closing: no background work any more
		return
	}
	t := time.NewTimer(replyTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
