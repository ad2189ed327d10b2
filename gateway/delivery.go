package gateway

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/internal/testsignal"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

type deliveryState int

// replyTimeout bounds the work on one reply (ack, nack, ext) of a client,
// whatever NATS does meanwhile; an ack that runs out of it is answered
// ErrUnknown.
const replyTimeout = 5 * time.Second

const (
	active deliveryState = iota
	busy                 // an ack is on its way to JetStream
	finished
)

// delivery is one entry of the delivery table.
type delivery struct {
	id  string
	raw *dispatch.Raw
	// client is who it was handed to and at when (inflight.go).
	client Client
	at     time.Time

	mu       sync.Mutex
	state    deliveryState
	deadline time.Time
	timer    *time.Timer
}

// deliveryTable maps delivery ids to this gateway's in-flight deliveries.
type deliveryTable struct {
	mu sync.Mutex
	m  map[string]*delivery
	// testTimedOut fires when expire is done with a delivery
	// (TestSignals.TimedOut).
	testTimedOut testsignal.Signal[TimedOutDelivery]
}

func newDeliveryTable() *deliveryTable { return &deliveryTable{m: make(map[string]*delivery)} }

func (t *deliveryTable) add(d *delivery) {
	t.mu.Lock()
	t.m[d.id] = d
	t.mu.Unlock()
}

func (t *deliveryTable) get(id string) *delivery {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id]
}

func (t *deliveryTable) del(id string) {
	t.mu.Lock()
	delete(t.m, id)
	t.mu.Unlock()
}

// dropQueue forgets the deliveries of a deleted queue.
func (t *deliveryTable) dropQueue(queue string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, d := range t.m {
		if d.raw.Queue().Name() == queue {
			d.mu.Lock()
			d.state = finished
			if d.timer != nil {
				d.timer.Stop()
			}
			d.mu.Unlock()
			delete(t.m, id)
		}
	}
}

func (t *deliveryTable) stopTimers() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range t.m {
		d.mu.Lock()
		if d.timer != nil {
			d.timer.Stop()
		}
		d.mu.Unlock()
	}
}

// InFlight is the number of this gateway's deliveries not yet answered.
func (g *Gateway) InFlight() int {
	g.dels.mu.Lock()
	defer g.dels.mu.Unlock()
	return len(g.dels.m)
}

// newID makes a delivery id: a random (version 4) UUID whose first four bytes
// are this gateway's id, so any gateway can tell where to relay a reply.
func (g *Gateway) newID() string {
	u := uuid.New()
	copy(u[:4], g.idPfx)
	return u.String()
}

// deliver turns a message JetStream handed over into a delivery: fresh id,
// timer from the queue's current timeout.
func (g *Gateway) deliver(ctx context.Context, r *dispatch.Raw) (*Delivery, error) {
	q := r.Queue()
	msg, err := decoded(g.store.Decode(ctx, r.Msg))
	if store.BodyLost(err) {
		// The message names a large-message body that is not stored (or not
		// readable): put back, it would fail every pull again. It is handed
		// out as stored, without that body, so the client can see and ack it.
		g.log.Warn("large-message body not found; delivering the message without it",
			"queue", q.Name(), "seq", r.Seq, "object", r.Msg.Header.Get(mapping.HdrObject), "err", err)
		stripped := *r.Msg
		stripped.Header = make(nats.Header, len(r.Msg.Header))
		for k, v := range r.Msg.Header {
			if k != mapping.HdrObject {
				stripped.Header[k] = v
			}
		}
		msg, err = decoded(g.store.Decode(ctx, &stripped))
	}
	if err != nil {
		g.spawn(func(context.Context) { g.release(r, false) })
		return nil, err
	}
	if r.Group != "" {
		q.HeadServed() // its consumer reads the heads (groups.go)
	}
	if r.Group != "" && g.staleHead(ctx, r) {
		// Done or replaced meanwhile (groups.go): not a message any more.
		g.spawn(func(context.Context) { g.dropStale(r) })
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
		g.spawn(func(context.Context) { g.release(r, false) })
		return nil, err
	}
	now := time.Now()
	d := &delivery{id: g.newID(), raw: r, client: clientOf(ctx), at: now, deadline: now.Add(timeout)}
	out.ID, out.ref = d.id, d
	if r.PushedAt > 0 {
		g.obs.Pulled(q.Name(), time.Since(time.Unix(0, r.PushedAt)))
	}
	if timeout <= 0 {
		// Available again at once: the next pull gets it with one retry less,
		// and this id is dead before the client sees it.
		d.state = finished
		g.release(r, true)
		return out, nil
	}
	// An in-flight message does not keep its body in memory (thousands may be
	// in flight): a release reads it back from the stream.
	r.Msg.Data, r.BodyGone = nil, true
	g.dels.add(d)
	d.mu.Lock()
	// The timer's goroutine counts itself, and does nothing once the gateway
	// is closing (the delivery stays pending in JetStream, see Close).
	d.timer = time.AfterFunc(timeout, func() { g.within(func(context.Context) { g.expire(d) }) })
	d.mu.Unlock()
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
func (g *Gateway) take(d *delivery) bool {
	if !g.finish(d) {
		return false
	}
	g.dels.del(d.id)
	return true
}

// finish ends the delivery (a reply to it now finds it finished) but leaves
// it in the table: see expire.
func (g *Gateway) finish(d *delivery) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state != active {
		return false
	}
	d.state = finished
	if d.timer != nil {
		d.timer.Stop()
	}
	return true
}

// expire releases a delivery whose timeout passed. It stays counted in
// flight until its copy is stored: no client waits on a timer's release,
// so InFlight (lmq_deliveries_in_flight, the queue's in_flight) is what
// tells a watcher that the message is back in its queue; counted out
// before, a release by a client just after could store its copy first and
// put its message ahead of this one.
func (g *Gateway) expire(d *delivery) {
	if !g.finish(d) {
		return
	}
	q := d.raw.Queue().Name()
	// Deferred first, so it fires last: once the delivery is out of InFlight.
	defer g.dels.testTimedOut.Signal(TimedOutDelivery{Queue: q, ID: d.id})
	defer g.dels.del(d.id)
	g.obs.TimedOut(q)
	g.release(d.raw, true)
}

// Abandon gives back a delivery the front end could not hand to its client (the
// client went away): the message is available again at once and the delivery
// does not count as a retry.
func (g *Gateway) Abandon(_ context.Context, d *Delivery) {
	if d == nil || d.ref == nil {
		return
	}
	if g.take(d.ref) {
		g.release(d.ref.raw, false)
	}
}

// release puts a message back at the tail of its queue: a copy carrying the
// deliveries used so far is stored first, then the original is removed (a
// crash in between duplicates the message; it never loses it). counted says
// whether the delivery that ends here used up one of the message's retries.
func (g *Gateway) release(r *dispatch.Raw, counted bool) {
	used := r.Used()
	if !counted {
		used--
	}
	if used >= r.Retry+1 {
		g.discard(r)
		return
	}
	ctx, cancel := g.opContext()
	defer cancel()
	// To the tail of its own priority's subject (dispatch/priority.go).
	subj := r.Queue().Subject()
	if r.Level > 0 {
		subj = mapping.PrioritySubject(r.Queue().Name(), r.Level)
	}
	if r.Group != "" {
		// Still its group's one head (groups.go): stored only while the
		// original is the last message there.
		subj = r.Msg.Subject
	}
	cp := nats.NewMsg(subj)
	copyOwnHeaders(cp, r.Msg)
	cp.Header.Set(mapping.HdrDelivered, strconv.Itoa(used))
	if r.Receives > 0 {
		// Handed out to a client (counted or not: a visibility of 0 is a
		// receive that used no retry).
		cp.Header.Set(mapping.HdrReceives, strconv.Itoa(r.Receives))
		cp.Header.Set(mapping.HdrFirstReceived, strconv.FormatInt(r.FirstReceived, 10))
	}
	if r.Group != "" {
		jsapi.SetExpectLastSubjectSeq(cp, r.Seq)
	}
	if ns := store.ReadStamps(r.Msg.Header).Expires; ns != 0 {
		// The copy must expire when the original would have.
		left := time.Until(time.Unix(0, ns))
		if left <= 0 {
			g.drop(r)
			return
		}
		if r.Group == "" {
			// (A head is not removed by JetStream: its group would stay
			// without one. The gateway drops it when pulled expired.)
			setNatsTTL(cp, left)
		}
	}
	var err error
	if cp.Data, err = g.body(ctx, r); err != nil {
		if store.NotStored(err) {
			// Already gone: an ack whose answer was lost (ErrUnknown) did
			// take effect, or JetStream's backstop redelivered the message
			// and another client acked it. Nothing to put back.
			g.log.Debug("released message no longer stored", "queue", r.Queue().Name(), "seq", r.Seq)
			return
		}
		g.log.Error("could not release message; it returns after the backstop timeout", "queue", r.Queue().Name(), "err", err)
		return
	}
	if _, err := g.store.Publish(ctx, "release message", r.Queue().Name(), cp); store.WrongLast(err) {
		// A newer copy of this head is stored already: this one just goes.
		g.log.Debug("released group head replaced meanwhile", "queue", r.Queue().Name(), "group", r.Group)
	} else if err != nil {
		// Leave the original pending: JetStream's AckWait brings it back.
		g.log.Error("could not release message; it returns after the backstop timeout", "queue", r.Queue().Name(), "err", err)
		return
	}
	if err := g.ackRemove(ctx, r); err != nil {
		g.log.Warn("released message not removed; it may be delivered twice", "queue", r.Queue().Name(), "err", err)
	}
	g.disp.NotifyLevel(r.Queue().Name(), r.Level)
}

// copyOwnHeaders copies the message's headers except JetStream's own
// (Nats-*): a copy must not inherit a batch id, a message id (it would be
// dropped as a duplicate), a TTL or schedule markers of the original.
func copyOwnHeaders(dst, src *nats.Msg) { jsapi.CopyOwnHeaders(dst.Header, src.Header) }

// body returns the stored body of r, reading it from the stream when the
// delivery let go of it.
func (g *Gateway) body(ctx context.Context, r *dispatch.Raw) ([]byte, error) {
	if !r.BodyGone {
		return r.Msg.Data, nil
	}
	return g.store.ReadBack(ctx, r.Queue().Name(), r.Seq)
}

// discard ends a message whose retries are used up: it moves to the queue
// its dead_letter_queue property names (redrive.go), else it becomes a dead
// letter when the queue keeps them (the dead_letter property), else it is
// dropped as LMQ did. A move that fails falls back to the others.
func (g *Gateway) discard(r *dispatch.Raw) {
	if target := g.redriveTarget(r.Queue().Name()); target != "" {
		if err := g.redrive(r, target); err == nil {
			g.obs.Discarded(r.Queue().Name())
			return
		} else {
			g.log.Warn("could not move message to its dead-letter queue; keeping it as a dead letter or dropping it",
				"queue", r.Queue().Name(), "dead_letter_queue", target, "err", err)
		}
	}
	if g.props.Effective(r.Queue().Name()).DeadLetter {
		if err := g.bury(r); err == nil {
			g.obs.Discarded(r.Queue().Name())
			return
		} else {
			g.log.Warn("could not keep dead letter; dropping it", "queue", r.Queue().Name(), "err", err)
		}
	}
	g.drop(r)
	g.obs.Discarded(r.Queue().Name())
}

// drop removes a message (and its large body) for good.
func (g *Gateway) drop(r *dispatch.Raw) {
	ctx, cancel := g.opContext()
	defer cancel()
	advanced, err := g.groupEnd(ctx, r)
	if err != nil {
		g.log.Warn("could not remove message", "queue", r.Queue().Name(), "err", err)
		return
	}
	if err := g.ackRemove(ctx, r); err != nil {
		g.log.Warn("could not remove message", "queue", r.Queue().Name(), "err", err)
		return
	}
	g.store.DropBody(ctx, r.Msg)
	if !advanced {
		g.groupNext(r)
	}
}

// ackRemove acks the JetStream message, which removes it from the WorkQueue
// stream, and waits for JetStream's answer.
func (g *Gateway) ackRemove(ctx context.Context, r *dispatch.Raw) error {
	return g.store.Ack(ctx, r.Msg)
}

// Reply applies a client's ack, nack or ext to the delivery id of queue.
// Unknown, superseded or expired ids give ErrNotFound.
func (g *Gateway) Reply(ctx context.Context, queue, id string, kind ReplyKind) error {
	if err := validName(queue); err != nil {
		return err
	}
	d := g.dels.get(id)
	if d == nil {
		if g.acked.Has(id) {
			return fmt.Errorf("delivery %s: %w", id, ErrAlreadyAcked)
		}
		return g.relayReply(ctx, queue, id, kind, 0)
	}
	if d.raw.Queue().Name() != queue {
		return fmt.Errorf("delivery %s in queue %q: %w", id, queue, ErrNotFound)
	}
	return g.replyLocal(ctx, d, kind)
}

func (g *Gateway) replyLocal(ctx context.Context, d *delivery, kind ReplyKind) error {
	// Made only when answered (every successful ack would pay for it).
	notFound := func() error { return fmt.Errorf("delivery %s: %w", d.id, ErrNotFound) }
	q := d.raw.Queue()
	switch kind {
	case Ack:
		d.mu.Lock()
		if d.state != active || !time.Now().Before(d.deadline) {
			d.mu.Unlock()
			return notFound()
		}
		d.state = busy
		d.mu.Unlock()
		gctx, gcancel := context.WithTimeout(context.WithoutCancel(ctx), replyTimeout)
		advanced, err := g.groupEnd(gctx, d.raw)
		gcancel()
		if err != nil {
			// (Its backlog message first: a head acked without it would
			// be handed out again as the group's next, groups.go.)
			d.mu.Lock()
			d.state = active
			d.mu.Unlock()
			return store.Outcome("ack", err)
		}
		// The ack is bounded by its own deadline, not the client's: a client
		// that leaves mid-ack still gets its ack applied, and one that waits
		// gets an answer within replyTimeout even when the NATS node under
		// this gateway died with the request in flight. (A request with a
		// timeout rather than a context: no context and timer made per ack.)
		if err := g.store.AckWithin(d.raw.Msg, replyTimeout); err != nil {
			d.mu.Lock()
			d.state = active
			expired := !time.Now().Before(d.deadline)
			d.mu.Unlock()
			if expired {
				g.expire(d)
			}
			return store.Outcome("ack", err)
		}
		d.mu.Lock()
		d.state = finished
		d.timer.Stop()
		d.mu.Unlock()
		g.dels.del(d.id)
		g.acked.Add(d.id)
		// DropBody runs on its own deadline, whatever ctx does.
		g.store.DropBody(ctx, d.raw.Msg)
		if !advanced {
			g.groupNext(d.raw)
		}
	case Nack:
		if !time.Now().Before(d.deadline) || !g.take(d) {
			return notFound()
		}
		g.nackRelease(d.raw)
	case Ext:
		timeout := g.props.Effective(q.Name()).TimeoutDuration()
		ectx, cancel := context.WithTimeout(ctx, replyTimeout)
		defer cancel()
		if err := g.disp.EnsureAckWait(ectx, q, timeout); err != nil {
			return err
		}
		d.mu.Lock()
		if d.state != active || !time.Now().Before(d.deadline) {
			d.mu.Unlock()
			return notFound()
		}
		d.deadline = time.Now().Add(timeout)
		d.timer.Reset(timeout)
		d.mu.Unlock()
		// Restart JetStream's backstop clock as well.
		if err := g.store.Progress(d.raw.Msg); err != nil {
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
func (g *Gateway) nackRelease(r *dispatch.Raw) {
	done := make(chan struct{})
	if !g.spawn(func(context.Context) {
		defer close(done)
		g.release(r, true)
	}) {
		g.release(r, true) // closing: no background work any more
		return
	}
	t := time.NewTimer(replyTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
