package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
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

// raw is a message JetStream handed to this gateway, not yet a delivery.
type raw struct {
	q        *queueState
	msg      *nats.Msg
	sseq     uint64
	dc       int // JetStream's delivery count of this copy
	prev     int // deliveries consumed by earlier copies (Lmq-Delivered)
	retry    int
	pushedAt int64
	bodyGone bool // msg.Data was let go while in flight (see Gateway.body)
}

// expired reports whether the message's ttl has passed.
func (r *raw) expired(now time.Time) bool {
	ns := readStamped(r.msg.Header).expires
	return ns != 0 && now.UnixNano() >= ns
}

// used is the number of deliveries consumed including the current one.
func (r *raw) used() int { return r.prev + r.dc }

// waiter is one client pull waiting for a message, registered on one queue or,
// for pull-any, on several: the first queue that claims it serves it.
type waiter struct {
	ch      chan *raw // receives exactly one value once claimed (nil = empty)
	claimed atomic.Bool
	noWait  bool
	// pending counts the queues whose covering no_wait fetch has not yet come
	// back empty; a no-wait waiter answers empty when it reaches zero.
	pending atomic.Int32
}

func newWaiter(noWait bool, queues int) *waiter {
	w := &waiter{ch: make(chan *raw, 1), noWait: noWait}
	w.pending.Store(int32(queues))
	return w
}

type waitEntry struct {
	w   *waiter
	seq uint64
}

// queueState is this gateway's dispatcher for one queue.
type queueState struct {
	g                       *Gateway
	name, enc               string
	stream, subject, reqSub string

	mu         sync.Mutex
	ackWait    time.Duration
	waiters    []waitEntry
	regSeq     uint64 // sequence of the last registered waiter
	fetching   bool
	cur        *fetchReq       // the outstanding pull request
	probes     []chan struct{} // closed when the next pull request is answered
	inbox      string          // reply subject prefix of its pull requests
	sub        *nats.Subscription
	st         jetstream.Stream // cached handle, see streamHandle
	dirty      bool             // a notification came while fetching
	last       time.Time        // last pull request
	lastNotify time.Time        // last notification of a new message
	dead       bool
}

func newQueueState(g *Gateway, name, stream string) (*queueState, error) {
	q := &queueState{
		g:       g,
		name:    name,
		enc:     mapping.EncodeName(name),
		stream:  stream,
		subject: mapping.QueueSubject(name),
		reqSub:  "$JS.API.CONSUMER.MSG.NEXT." + stream + "." + mapping.ConsumerName,
		inbox:   g.nc.NewInbox() + ".",
	}
	sub, err := g.nc.Subscribe(q.inbox+"*", func(m *nats.Msg) { g.onPullReply(q, m) })
	if err != nil {
		return nil, fmt.Errorf("subscribe pull replies: %w", err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("pull replies: %w", err)
	}
	q.sub = sub
	return q, nil
}

// streamHandle returns (and caches) the queue's stream handle.
func (q *queueState) streamHandle(ctx context.Context) (jetstream.Stream, error) {
	q.mu.Lock()
	st := q.st
	q.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := q.g.js.Stream(ctx, q.stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", q.stream, err)
	}
	q.mu.Lock()
	q.st = st
	q.mu.Unlock()
	return st, nil
}

// fetchReq is one outstanding no_wait pull request.
type fetchReq struct {
	id     uint64
	q      *queueState
	batch  int
	got    int
	regSeq uint64    // waiters registered up to here are covered by it
	noWait []*waiter // no-wait waiters covered by it
	probes []chan struct{}
}

func (q *queueState) add(w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.regSeq++
	q.waiters = append(q.waiters, waitEntry{w: w, seq: q.regSeq})
	q.kickLocked()
}

// addPassive registers w without fetching for it: a fetch for any reason
// (another client, a notification, a probe) serves it.
func (q *queueState) addPassive(w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.regSeq++
	q.waiters = append(q.waiters, waitEntry{w: w, seq: q.regSeq})
}

// probe makes sure a pull request covering the current waiters is issued and
// returns a channel closed when it has been answered.
func (q *queueState) probe() <-chan struct{} {
	ch := make(chan struct{})
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dead {
		close(ch)
		return ch
	}
	q.probes = append(q.probes, ch)
	q.kickLocked()
	if !q.fetching {
		// Nobody waits any more (the waiter was served elsewhere).
		for _, c := range q.probes {
			close(c)
		}
		q.probes = nil
	}
	return ch
}

func (q *queueState) remove(w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, e := range q.waiters {
		if e.w == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			return
		}
	}
}

func (q *queueState) notify() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.lastNotify = time.Now()
	if q.fetching {
		q.dirty = true
		return
	}
	q.kickLocked()
}

// compactLocked drops claimed waiters and returns how many remain.
func (q *queueState) compactLocked() int {
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
func (q *queueState) kickLocked() {
	if q.fetching || q.dead {
		return
	}
	n := q.compactLocked()
	if n == 0 {
		return
	}
	g := q.g
	fr := &fetchReq{id: g.fetchSeq.Add(1), q: q, batch: min(n, maxBatch), regSeq: q.regSeq}
	for _, e := range q.waiters {
		if e.w.noWait {
			fr.noWait = append(fr.noWait, e.w)
		}
	}
	fr.probes, q.probes = q.probes, nil
	q.cur, q.fetching, q.dirty, q.last = fr, true, false, time.Now()
	body := `{"batch":` + strconv.Itoa(fr.batch) + `,"no_wait":true}`
	if time.Since(q.lastNotify) < recentPush {
		// JetStream acknowledges a publish before the consumer has counted
		// the message, and a bare no_wait request is refused at once when it
		// sees nothing pending: with expires it waits that long for the first
		// message, and still returns as soon as it has some.
		body = `{"batch":` + strconv.Itoa(fr.batch) + `,"no_wait":true,"expires":` + strconv.FormatInt(int64(settleWait), 10) + `}`
	}
	if err := g.nc.PublishRequest(q.reqSub, q.inbox+strconv.FormatUint(fr.id, 10), []byte(body)); err != nil {
		g.log.Warn("pull request failed", "queue", q.name, "err", err)
		q.cur, q.fetching = nil, false
		for _, c := range fr.probes {
			close(c)
		}
	}
}

// fetchDone ends a pull request. empty is true when JetStream said the queue
// had nothing (more) for it.
func (q *queueState) fetchDone(fr *fetchReq, empty bool, retryAfter time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cur != fr {
		return
	}
	q.cur, q.fetching = nil, false
	for _, c := range fr.probes {
		close(c)
	}
	if empty {
		for _, w := range fr.noWait {
			if w.pending.Add(-1) == 0 && w.claimed.CompareAndSwap(false, true) {
				w.ch <- nil
			}
		}
	}
	if retryAfter > 0 {
		time.AfterFunc(retryAfter, q.notify)
		return
	}
	if !empty || q.dirty {
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
func (q *queueState) handoff(r *raw) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.waiters) > 0 {
		w := q.waiters[0].w
		q.waiters[0] = waitEntry{}
		q.waiters = q.waiters[1:]
		if w.claimed.CompareAndSwap(false, true) {
			w.ch <- r
			return true
		}
	}
	return false
}

func (q *queueState) markDirty() {
	q.mu.Lock()
	q.dirty = true
	q.mu.Unlock()
}

// shutdown ends the dispatcher: its waiters answer empty.
func (q *queueState) shutdown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dead = true
	if q.sub != nil {
		_ = q.sub.Unsubscribe()
	}
	if q.cur != nil {
		for _, c := range q.cur.probes {
			close(c)
		}
	}
	for _, c := range q.probes {
		close(c)
	}
	q.cur, q.fetching, q.probes = nil, false, nil
	for _, e := range q.waiters {
		if e.w.claimed.CompareAndSwap(false, true) {
			e.w.ch <- nil
		}
	}
	q.waiters = nil
}

// repollLoop polls queues with waiting clients that saw no notification for a
// while: messages from plain NATS publishers and JetStream's own redeliveries
// arrive without one.
func (g *Gateway) repollLoop() {
	defer g.bg.Done()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-g.closing:
			return
		case <-t.C:
		}
		g.queues.mu.Lock()
		states := make([]*queueState, 0, len(g.queues.states))
		for _, q := range g.queues.states {
			states = append(states, q)
		}
		g.queues.mu.Unlock()
		waiting := 0
		for _, q := range states {
			q.mu.Lock()
			if len(q.waiters) > 0 {
				waiting++
			}
			q.mu.Unlock()
		}
		// Bound the re-poll rate to about 50 requests a second however many
		// queues have waiting clients (a pull-any over many queues).
		interval := max(g.cfg.RepollInterval, time.Duration(waiting)*time.Second/50)
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
	}
}

// abandonFetchLocked forgets the pull request in flight, whose answer will not
// come; the next kick sends a new one.
func (q *queueState) abandonFetchLocked() {
	if q.cur != nil {
		for _, c := range q.cur.probes {
			close(c)
		}
	}
	q.cur, q.fetching = nil, false
}

// onReconnect runs when the NATS connection is back: pull requests sent
// before it went away lost their answers with the old connection, so they
// are forgotten and the waiting clients' queues polled again at once instead
// of after stuckFetch. (A message JetStream did send for an old request
// still arrives on the queue's subscription and is handed over or released
// as usual.)
func (g *Gateway) onReconnect() {
	g.queues.mu.Lock()
	states := make([]*queueState, 0, len(g.queues.states))
	for _, q := range g.queues.states {
		states = append(states, q)
	}
	g.queues.mu.Unlock()
	for _, q := range states {
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

// onPullReply receives every message and status of this gateway's pull requests.
//
// JetStream delivers pulled messages with their stream subject, so they are
// told apart by subscription (one per queue); status messages come on the
// request's reply subject, which names the request.
func (g *Gateway) onPullReply(q *queueState, m *nats.Msg) {
	q.mu.Lock()
	fr := q.cur
	q.mu.Unlock()
	if status := m.Header.Get("Status"); status != "" && len(m.Data) == 0 {
		id, err := strconv.ParseUint(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:], 10, 64)
		if err != nil || fr == nil || fr.id != id {
			return
		}
		switch status {
		case "404":
			q.fetchDone(fr, true, 0)
		case "408":
			if strings.Contains(m.Header.Get("Description"), "Pending") {
				// "Requests Pending": other gateways' requests are ahead of
				// this one; try again soon.
				q.fetchDone(fr, false, 5*time.Millisecond)
			} else {
				q.fetchDone(fr, true, 0) // "Request Timeout": nothing came
			}
		case "100":
		default:
			// During an election every queue's requests are refused at
			// once, hundreds a second: one line per interval says it.
			if n, ok := g.noise.allow("pull request refused"); ok {
				g.log.Warn("pull request refused", "queue", fr.q.name, "status", status,
					"description", m.Header.Get("Description"), "suppressed", n)
			}
			q.fetchDone(fr, true, time.Second)
		}
		return
	}
	r, ok := g.parseRaw(q, m)
	if !ok {
		return
	}
	if r.expired(time.Now()) {
		q.markDirty()
		go g.drop(r)
	} else if r.used() > r.retry+1 {
		// Retries used up (the message came back through JetStream's own
		// redelivery): drop it, and look again for the waiting client.
		q.markDirty()
		go g.discard(r)
	} else if !q.handoff(r) {
		go g.release(r, false)
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

func (g *Gateway) parseRaw(q *queueState, m *nats.Msg) (*raw, bool) {
	tok := strings.Split(m.Reply, ".")
	// $JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending> or, with
	// the v2 format, two more tokens (domain, account hash) after $JS.ACK.
	off := 4
	if len(tok) >= 12 {
		off = 6
	} else if len(tok) < 9 {
		return nil, false
	}
	dc, err1 := strconv.Atoi(tok[off])
	sseq, err2 := strconv.ParseUint(tok[off+1], 10, 64)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	r := &raw{q: q, msg: m, sseq: sseq, dc: dc}
	s := readStamped(m.Header)
	r.prev, r.retry, r.pushedAt = s.delivered, s.retry, s.pushedAt
	if r.retry < 0 {
		r.retry = g.props.effective(q.name).Retry
	}
	if r.pushedAt == 0 {
		r.pushedAt, _ = strconv.ParseInt(tok[off+3], 10, 64)
	}
	return r, true
}

// localByEnc finds local queue state by encoded name.
func (r *registry) localByEnc(enc string) *queueState {
	r.mu.Lock()
	defer r.mu.Unlock()
	name, ok := r.known[mapping.StreamPrefix+enc]
	if !ok {
		return nil
	}
	return r.states[name]
}

// Pull hands out the queue's next available message, creating the queue if
// needed. wait < 0 waits until a message comes or ctx ends; wait == 0 does not
// wait. It returns (nil, nil) when no message came in time.
func (g *Gateway) Pull(ctx context.Context, queue string, wait time.Duration) (*Delivery, error) {
	q, err := g.queues.ensure(ctx, queue)
	if err != nil {
		return nil, err
	}
	r, err := g.await(ctx, []*queueState{q}, wait)
	if r == nil || err != nil {
		return nil, err
	}
	return g.deliver(ctx, r)
}

// PullAny is Pull over every queue whose name matches re, including queues
// created while it waits. Queues are not created by it.
//
// The waiter is registered on every matching queue without fetching, then the
// queues are probed one at a time, starting at a rotating offset so that busy
// queues share the pulls fairly. Probing all at once would take a message
// from each non-empty queue and have to give all but one back.
func (g *Gateway) PullAny(ctx context.Context, re *regexp.Regexp, wait time.Duration) (*Delivery, error) {
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	seen := make(map[string]bool)
	var qs []*queueState
	w := newWaiter(false, 0)
	defer func() {
		for _, q := range qs {
			q.remove(w)
		}
	}()
	for {
		names, created := g.queues.matching(re)
		var fresh []*queueState
		for _, name := range names {
			if seen[name] {
				continue
			}
			q, err := g.queues.open(ctx, name)
			if err != nil {
				continue // deleted meanwhile: never brought back
			}
			seen[name] = true
			fresh = append(fresh, q)
			qs = append(qs, q)
			q.addPassive(w)
		}
		r, gotOne, stop := g.probe(ctx, w, fresh)
		if !gotOne && !stop && wait != 0 {
			select {
			case r = <-w.ch:
				gotOne = true
			case <-created:
				continue
			case <-deadline:
			case <-ctx.Done():
			case <-g.closing:
			}
		}
		if gotOne && r == nil {
			// A queue went away and answered the waiter: start over.
			for _, q := range qs {
				q.remove(w)
			}
			w, qs, seen = newWaiter(false, 0), nil, make(map[string]bool)
			continue
		}
		if !gotOne {
			var err error
			if r, err = g.giveUp(ctx, w); r == nil {
				return nil, err
			}
		}
		return g.deliver(ctx, r)
	}
}

// probe fetches for w from each of qs in turn until w is served. stop is true
// when the caller's context or the gateway ended the wait.
func (g *Gateway) probe(ctx context.Context, w *waiter, qs []*queueState) (r *raw, gotOne, stop bool) {
	if len(qs) == 0 {
		return nil, false, false
	}
	start := int(g.rr.Add(1) % uint64(len(qs)))
	for i := range qs {
		done := qs[(start+i)%len(qs)].probe()
		select {
		case r = <-w.ch:
			return r, true, false
		case <-done:
		case <-ctx.Done():
			return nil, false, true
		case <-g.closing:
			return nil, false, true
		}
	}
	return nil, false, false
}

// await registers a waiter on qs and waits for a message.
func (g *Gateway) await(ctx context.Context, qs []*queueState, wait time.Duration) (*raw, error) {
	w := newWaiter(wait == 0, len(qs))
	for _, q := range qs {
		q.add(w)
	}
	defer func() {
		for _, q := range qs {
			q.remove(w)
		}
	}()
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	select {
	case r := <-w.ch:
		return r, nil
	case <-deadline:
	case <-ctx.Done():
	case <-g.closing:
	}
	return g.giveUp(ctx, w)
}

// giveUp ends a wait. If a message was handed over at the same moment, a
// client that is still there gets it, one that left gives it back.
func (g *Gateway) giveUp(ctx context.Context, w *waiter) (*raw, error) {
	if w.claimed.CompareAndSwap(false, true) {
		return nil, ctx.Err()
	}
	r := <-w.ch
	if r == nil {
		return nil, ctx.Err()
	}
	if ctx.Err() != nil {
		go g.release(r, false)
		return nil, ctx.Err()
	}
	return r, nil
}

type relayRequest struct {
	Queue string `json:"queue"`
	ID    string `json:"id"`
	Kind  int    `json:"kind"`
}

func marshalRelay(queue, id string, kind ReplyKind) []byte {
	b, _ := json.Marshal(relayRequest{Queue: queue, ID: id, Kind: int(kind)})
	return b
}
