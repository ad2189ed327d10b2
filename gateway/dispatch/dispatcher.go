package dispatch

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

const (
	// maxBatch bounds one pull request.
	maxBatch = 256
	// stuckFetch is how long a no_wait pull request may go unanswered.
	stuckFetch = 5 * time.Second
	// recentPush: a queue notified this recently may have a message that its
	// consumer has not counted yet; pull requests then wait up to settleWait.
	recentPush = 200 * time.Millisecond
	settleWait = 50 * time.Millisecond
)

// Raw is a message JetStream handed to this gateway, not yet a delivery:
// what the dispatcher hands the core (Pull, PullAny, Rules).
type Raw struct {
	q        *Queue
	Msg      bus.Msg
	Seq      uint64 // its stream sequence
	DC       int    // JetStream's delivery count of this copy
	Prev     int    // deliveries consumed by earlier copies (Lmq-Delivered)
	Retry    int
	PushedAt int64
	Expires  int64 // Lmq-Expires (Unix ns), 0: never; read once by parseRaw
	BodyGone bool  // Msg.Data was let go while in flight (see Gateway.body)
	Level    int   // its priority: it came from that level's subject
	// Group is the ordered group of a group's head copy ("" for other
	// messages) and GroupSeq the backlog message it stands for
	// (mapping/groups.go).
	Group    string
	GroupSeq uint64
	// FirstReceived is when the message was first handed out (Unix ns):
	// from its Lmq-First-Received, or the core's delivery of this copy.
	FirstReceived int64
	// Receives counts the message's deliveries to clients, this copy's
	// included, once the core delivered it (0 before).
	Receives int
}

// Queue is the dispatcher of the message's queue.
func (r *Raw) Queue() *Queue { return r.q }

// Expired reports whether the message's ttl has passed.
func (r *Raw) Expired(now time.Time) bool {
	return r.Expires != 0 && now.UnixNano() >= r.Expires
}

// Used is the number of deliveries consumed including the current one.
func (r *Raw) Used() int { return r.Prev + r.DC }

// waiter is one client pull waiting for a message, registered on one queue or,
// for pull-any, on several: the first queue that claims it serves it.
type waiter struct {
	ch      chan *Raw // receives exactly one value once claimed (nil = empty)
	claimed atomic.Bool
	noWait  bool
	// pending counts the queues whose covering no_wait fetch has not yet come
	// back empty; a no-wait waiter answers empty when it reaches zero.
	pending atomic.Int32
}

func newWaiter(noWait bool, queues int) *waiter {
	w := &waiter{ch: make(chan *Raw, 1), noWait: noWait}
	w.pending.Store(int32(queues))
	return w
}

type waitEntry struct {
	w   *waiter
	seq uint64
}

// Queue is this gateway's dispatcher for one queue.
type Queue struct {
	d                       *Dispatcher
	name, enc               string
	stream, subject, reqSub string

	mu         sync.Mutex
	ackWait    time.Duration
	ready      bool // the consumer exists, as far as this gateway knows
	waiters    []waitEntry
	regSeq     uint64 // sequence of the last registered waiter
	fetching   bool
	cur        *fetchReq    // the outstanding pull request
	sh         *store.Shard // cached handle, see shardHandle
	dirty      bool         // a notification came while fetching
	last       time.Time    // last pull request
	lastNotify time.Time    // last notification of a new message
	dead       bool
	prio       prioState // priority levels (priority.go)
	// limit is the max_inflight its consumer was made or updated with
	// (control.go).
	limit int
	// groups: the queue is known to have ordered groups; lastGroupSweep is
	// when the core last looked for stranded ones (groups.go).
	groups         bool
	lastGroupSweep time.Time
	// heads: its consumer reads the groups' heads, trusted until
	// headsUntil (heads.go).
	heads      bool
	headsUntil time.Time
}

func newQueue(d *Dispatcher, name string) *Queue {
	stream := mapping.StreamName(name)
	return &Queue{
		d:       d,
		name:    name,
		enc:     mapping.EncodeName(name),
		stream:  stream,
		subject: mapping.QueueSubject(name),
		reqSub:  d.store.PullSubject(name, 0),
	}
}

// ensureConsumer makes the queue's consumer unless this gateway made or saw
// it already. Consumers exist only for queues in use: JetStream removes one
// after mapping.ConsumerInactive without pulls (and without deliveries in
// flight), and the next pull makes it again; a missing one shows as "no
// responders" to a pull request (onPullReply).
func (q *Queue) ensureConsumer(ctx context.Context) error {
	q.mu.Lock()
	ready, ackWait, groups := q.ready, q.ackWait, q.groups
	q.mu.Unlock()
	if ready {
		return nil
	}
	// What the shard held lately, from one look shared by every queue of
	// the shard first used meanwhile (nil: unknown): priority levels and
	// group backlogs (firstuse.go). A queue with groups gets a consumer
	// reading their heads (heads.go).
	look := q.lookAtShard(ctx)
	backlog := look == nil || look.Groups[q.enc]
	limit := q.d.props.Effective(q.name).MaxInflight
	made, err := q.d.store.Consumers().MakeConsumer(ctx, q.name, 0, store.Limits{AckWait: ackWait, MaxInflight: limit, Heads: groups || backlog})
	if err != nil {
		return err
	}
	q.mu.Lock()
	q.ready = true
	q.ackWait = max(q.ackWait, made.AckWait)
	q.limit = limit
	q.noteHeadsLocked(made.Heads)
	q.mu.Unlock()
	// Messages of priorities may be stored (pushed before a restart, or
	// through another gateway): learn their levels before the first pull.
	q.learnLevels(ctx, look)
	// And groups may have been left without a head by a gateway that
	// stopped (groups.go).
	if backlog {
		q.d.spawn(func(context.Context) { q.sweepGroups(true) })
	}
	return nil
}

// consumerMissing is called when a pull request found no consumer: it is
// made again in the background and the waiting clients' request re-sent.
func (q *Queue) consumerMissing() {
	q.mu.Lock()
	q.ready = false
	q.noteHeadsLocked(false)
	q.mu.Unlock()
	q.d.spawn(func(life context.Context) {
		ctx, cancel := context.WithTimeout(life, opTimeout)
		defer cancel()
		if err := q.ensureConsumer(ctx); err != nil {
			// A consumer without a leader (an election) answers the same
			// way and cannot be made either: try again in a second.
			if n, ok := q.d.noise.Allow("re-creating queue consumer failed"); ok {
				q.d.log.Warn("re-creating queue consumer failed", "queue", q.name, "err", err, "suppressed", n)
			}
			q.d.wakes.At(wakeTarget{q: q}, time.Now().Add(time.Second))
			return
		}
		q.mu.Lock()
		q.kickLocked()
		q.mu.Unlock()
	})
}

// shardHandle returns (and caches) the handle on the queue's shard stream.
func (q *Queue) shardHandle(ctx context.Context) (*store.Shard, error) {
	q.mu.Lock()
	sh := q.sh
	q.mu.Unlock()
	if sh != nil {
		return sh, nil
	}
	sh, err := q.d.store.Shards().QueueShard(ctx, q.name)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", q.stream, err)
	}
	q.mu.Lock()
	q.sh = sh
	q.mu.Unlock()
	return sh, nil
}

// pullTable is this gateway's pull requests in flight, by id: their status
// answers come on inbox+id, on one subscription for every queue.
type pullTable struct {
	inbox string
	mu    sync.Mutex
	byID  map[uint64]*fetchReq
}

func newPullTable(inbox string) *pullTable {
	return &pullTable{inbox: inbox + ".", byID: make(map[uint64]*fetchReq)}
}

func (t *pullTable) add(fr *fetchReq) {
	t.mu.Lock()
	t.byID[fr.id] = fr
	t.mu.Unlock()
}

func (t *pullTable) remove(fr *fetchReq) {
	t.mu.Lock()
	delete(t.byID, fr.id)
	t.mu.Unlock()
}

func (t *pullTable) get(id uint64) *fetchReq {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

// fetchReq is one outstanding no_wait pull request.
type fetchReq struct {
	id     uint64
	q      *Queue
	level  int // the priority level it pulls from (priority.go)
	batch  int
	got    int
	regSeq uint64    // waiters registered up to here are covered by it
	noWait []*waiter // no-wait waiters covered by it
}

func (q *Queue) add(w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.regSeq++
	q.waiters = append(q.waiters, waitEntry{w: w, seq: q.regSeq})
	q.d.queues.busy(q)
	q.kickLocked()
	q.d.TestSignals.WaiterParked.Signal(Parked{Queue: q.name, NoWait: w.noWait})
}

func (q *Queue) remove(w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, e := range q.waiters {
		if e.w == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			return
		}
	}
}

func (q *Queue) notify() { q.notifyLevel(0) }

// Name is the queue's name.
func (q *Queue) Name() string { return q.name }

// Subject is the queue's subject of deliverable messages of priority 0.
func (q *Queue) Subject() string { return q.subject }

// compactLocked drops claimed waiters and returns how many remain.
func (q *Queue) compactLocked() int {
	n := 0
	for _, e := range q.waiters {
		if !e.w.claimed.Load() {
			q.waiters[n] = e
			n++
		}
	}
	clear(q.waiters[n:])
	q.waiters = q.waiters[:n]
	return n
}

// kickLocked issues a pull request for the waiting clients unless one is out.
func (q *Queue) kickLocked() {
	if q.fetching || q.dead {
		return
	}
	n := q.compactLocked()
	if n == 0 {
		return
	}
	eff := q.d.props.Effective(q.name)
	if eff.Paused {
		q.pausedLocked() // control.go
		return
	}
	reqSub, level := q.reqSub, 0
	if q.prio.mask != 0 || q.prio.making {
		var ok bool
		if level, reqSub, ok = q.levelRequestLocked(); !ok {
			return // kicked again once the level's consumer exists
		}
		q.prio.fresh = 0
	}
	d := q.d
	fr := &fetchReq{id: d.fetchSeq.Add(1), q: q, level: level, batch: min(n, maxBatch), regSeq: q.regSeq}
	for _, e := range q.waiters {
		if e.w.noWait {
			fr.noWait = append(fr.noWait, e.w)
		}
	}
	q.cur, q.fetching, q.dirty, q.last = fr, true, false, time.Now()
	var settle time.Duration
	if eff.MaxInflight > 0 || q.limit > 0 {
		// While the limit is reached JetStream holds the request until an
		// ack (by any gateway) frees a slot (control.go); clients that do
		// not wait are answered after a moment.
		settle = limitHold
		if len(fr.noWait) == fr.batch {
			settle = settleWait
		}
	} else if level > 0 && q.settleLevelLocked(level) || level == 0 && time.Since(q.lastNotify) < recentPush {
		// JetStream acknowledges a publish before the consumer has counted
		// the message, and a bare no_wait request is refused at once when it
		// sees nothing pending: with expires it waits that long for the first
		// message, and still returns as soon as it has some.
		settle = settleWait
	}
	d.pulls.add(fr)
	d.TestSignals.PullIssued.Signal(q.name)
	if err := d.bus.PublishRequest(reqSub, d.pulls.inbox+strconv.FormatUint(fr.id, 10), store.EncodePullRequest(fr.batch, settle)); err != nil {
		d.log.Warn("pull request failed", "queue", q.name, "err", err)
		d.pulls.remove(fr)
		q.cur, q.fetching = nil, false
	}
}

// fetchDone ends a pull request. empty is true when JetStream said the queue
// had nothing (more) for it.
func (q *Queue) fetchDone(fr *fetchReq, empty bool, retryAfter time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cur != fr {
		return
	}
	q.d.pulls.remove(fr)
	q.cur, q.fetching = nil, false
	if empty && retryAfter == 0 && q.levelEmptyLocked(fr) {
		return // the next request goes one level down
	}
	if empty && fr.level == 0 {
		for _, w := range fr.noWait {
			if w.pending.Add(-1) == 0 && w.claimed.CompareAndSwap(false, true) {
				w.ch <- nil
			}
		}
	}
	if retryAfter < 0 {
		return // the caller sends the next request itself
	}
	if retryAfter > 0 {
		q.d.wakes.At(wakeTarget{q: q}, time.Now().Add(retryAfter))
		return
	}
	if !empty || q.dirty || q.limit > 0 {
		// (A limited queue's empty answer ends a held request: its waiting
		// clients send the next one, control.go.)
		q.kickLocked()
		return
	}
	// Empty: wait for a notification, unless a waiter came after the request.
	for _, e := range q.waiters {
		if e.seq > fr.regSeq && !e.w.claimed.Load() {
			q.kickLocked()
			return
		}
	}
}

// handoff gives a message to the longest-waiting client; false if none waits.
func (q *Queue) handoff(r *Raw) bool {
	if q.d.props.Effective(q.name).Paused {
		return false // paused while the request was out: put back
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.waiters) > 0 {
		w := q.waiters[0].w
		q.waiters[0] = waitEntry{}
		q.waiters = q.waiters[1:]
		if w.claimed.CompareAndSwap(false, true) {
			w.ch <- r
			q.d.TestSignals.WaiterWoken.Signal(q.name)
			return true
		}
	}
	return false
}

func (q *Queue) markDirty() {
	q.mu.Lock()
	q.dirty = true
	q.mu.Unlock()
}

// shutdown ends the dispatcher: its waiters answer empty.
func (q *Queue) shutdown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dead = true
	if q.cur != nil {
		q.d.pulls.remove(q.cur)
	}
	q.cur, q.fetching = nil, false
	for _, e := range q.waiters {
		if e.w.claimed.CompareAndSwap(false, true) {
			e.w.ch <- nil
		}
	}
	q.waiters = nil
}

// repollLoop polls queues with waiting clients that saw no notification for a
// while: messages from plain NATS publishers and JetStream's own redeliveries
// arrive without one. While no queue has waiting clients or a request out it
// sleeps until one has (locals.busy), so an idle gateway is not woken.
func (d *Dispatcher) repollLoop() {
	defer d.bg.Done()
	const tick = 250 * time.Millisecond
	var sweepClock levelSweepClock
	sweeping := make(chan struct{}, 1)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-d.closing:
			return
		case <-d.stopped:
			return
		case <-t.C:
		}
		// Only the queues with waiting clients or a request out: with
		// thousands of idle queues the loop must cost nothing.
		states := d.queues.busyStates()
		if len(states) == 0 {
			t.Stop()
			select {
			case <-d.closing:
				return
			case <-d.stopped:
				return
			case <-d.queues.activeWake:
			}
			t.Reset(tick)
			continue
		}
		waiting := 0
		for _, q := range states {
			q.mu.Lock()
			if len(q.waiters) > 0 {
				waiting++
			} else if !q.fetching {
				d.queues.idle(q)
			}
			q.mu.Unlock()
		}
		// Bound the re-poll rate to about 50 requests a second however many
		// queues have waiting clients (a pull-any over many queues).
		interval := max(d.cfg.RepollInterval, time.Duration(waiting)*time.Second/50)
		now := time.Now()
		for _, q := range states {
			q.mu.Lock()
			if q.fetching && now.Sub(q.last) > stuckFetch {
				// Its answer never came (a lost status): forget it.
				q.abandonFetchLocked()
			}
			if len(q.waiters) > 0 && now.Sub(q.last) >= interval {
				q.kickLocked()
			}
			q.mu.Unlock()
		}
		// Levels may have filled without any event (levelsweep.go): one
		// look per shard, off this goroutine, never two at once.
		if sweepClock.due(now, d.cfg.RepollInterval) {
			select {
			case sweeping <- struct{}{}:
				if !d.spawn(func(context.Context) {
					defer func() { <-sweeping }()
					d.sweepLevels(states)
				}) {
					<-sweeping
				}
			default:
			}
		}
	}
}

// abandonFetchLocked forgets the pull request in flight, whose answer will not
// come; the next kick sends a new one.
func (q *Queue) abandonFetchLocked() {
	if q.cur != nil {
		q.d.pulls.remove(q.cur)
	}
	q.cur, q.fetching = nil, false
}

// OnReconnect runs when the NATS connection is back: pull requests sent
// before it went away lost their answers with the old connection, so they
// are forgotten and the waiting clients' queues polled again at once instead
// of after stuckFetch. (A message JetStream did send for an old request
// still arrives on the queue's subscription and is handed over or released
// as usual.)
func (d *Dispatcher) OnReconnect() {
	for _, q := range d.queues.all() {
		q.mu.Lock()
		if q.fetching {
			q.abandonFetchLocked()
		}
		if len(q.waiters) > 0 {
			q.kickLocked()
		}
		q.mu.Unlock()
	}
}

// onPullReply receives every message and status of this gateway's pull
// requests, on one subscription (pullTable.inbox).
//
// JetStream delivers pulled messages with their stream subject, which names
// the queue; status messages come on the request's reply subject, which
// names the request.
func (d *Dispatcher) onPullReply(m bus.Msg) {
	if status := m.Header.Get("Status"); status != "" && len(m.Data) == 0 {
		id, err := strconv.ParseUint(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:], 10, 64)
		if err != nil {
			return
		}
		fr := d.pulls.get(id)
		if fr == nil {
			return
		}
		q := fr.q
		switch store.ClassifyPullStatus(&m) {
		case store.PullEmpty:
			q.fetchDone(fr, true, 0)
		case store.PullBusy:
			// Other gateways' requests are ahead of this one; try again soon.
			q.fetchDone(fr, false, 5*time.Millisecond)
		case store.PullIgnore:
		case store.PullNoConsumer:
			// Removed by JetStream after a while unused (or by an operator).
			q.fetchDone(fr, false, -1)
			if fr.level > 0 {
				q.mu.Lock()
				q.levelMissingLocked(fr.level)
				q.kickLocked() // makes it again
				q.mu.Unlock()
				break
			}
			q.consumerMissing()
		case store.PullRefused:
			// During an election every queue's requests are refused at
			// once, hundreds a second: one line per interval says it.
			if n, ok := d.noise.Allow("pull request refused"); ok {
				d.log.Warn("pull request refused", "queue", fr.q.name, "status", status,
					"description", m.Header.Get("Description"), "suppressed", n)
			}
			q.fetchDone(fr, true, time.Second)
		}
		return
	}
	kind, enc, ok := mapping.ParseSubject(m.Subject)
	if !ok || (kind != "q" && kind != "p" && kind != "h") {
		return
	}
	q := d.queues.localByEnc(enc)
	if q == nil {
		// The queue was deleted meanwhile: the message stays pending and
		// JetStream's AckWait brings it back (if it was not purged).
		return
	}
	q.mu.Lock()
	fr := q.cur
	q.mu.Unlock()
	r, ok := d.parseRaw(q, m)
	if !ok {
		return
	}
	if kind == "p" {
		if r.Level, ok = mapping.SubjectPriority(m.Subject); !ok {
			return // not one of ours (lmq.p.<kk>.<enc>.x from a NATS program)
		}
	}
	if kind == "h" {
		// A group's head: a copy a NATS program stored by hand without the
		// backlog sequence still names its group (from the subject).
		r.Group, _ = mapping.GroupFromSubject(m.Subject)
		r.GroupSeq, _ = strconv.ParseUint(m.Header.Get(mapping.HdrGroupSeq), 10, 64)
		q.markGroups()
	}
	// Not spawned once the gateway is closing: the message stays pending
	// and JetStream's AckWait brings it back.
	if r.Expired(time.Now()) {
		q.markDirty()
		d.spawn(func(context.Context) { d.rules.Drop(r) })
	} else if r.Used() > r.Retry+1 {
		// Retries used up (the message came back through JetStream's own
		// redelivery): drop it, and look again for the waiting client.
		q.markDirty()
		d.spawn(func(context.Context) { d.rules.Discard(r) })
	} else if !q.handoff(r) {
		d.spawn(func(context.Context) { d.rules.Release(r) })
	}
	if fr != nil {
		q.mu.Lock()
		fr.got++
		full := fr.got >= fr.batch
		q.mu.Unlock()
		if full {
			q.fetchDone(fr, false, 0)
		}
	}
}

// parseRaw reads a pulled message's delivery facts from its ack subject
// (bus.Msg.PullMeta); a message without a valid one is not JetStream's and
// is ignored.
func (d *Dispatcher) parseRaw(q *Queue, m bus.Msg) (*Raw, bool) {
	md, ok := m.PullMeta()
	if !ok || md.Seq == 0 || md.Delivered == 0 {
		return nil, false
	}
	r := &Raw{q: q, Msg: m, Seq: md.Seq, DC: int(min(md.Delivered, math.MaxInt32))}
	s := store.ReadStamps(m.Header)
	r.Prev, r.Retry, r.PushedAt, r.Expires = s.Delivered, s.Retry, s.PushedAt, s.Expires
	if r.Retry < 0 {
		r.Retry = d.props.Effective(q.name).Retry
	}
	if r.PushedAt == 0 {
		r.PushedAt = md.Stored
	}
	return r, true
}
