package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// maxQueuedAnswers bounds the answer bytes waiting behind a write in
// progress. A handler whose answer finds more queued waits until it is
// written, still holding its share of the connection's in-flight budget, so a
// client that sends requests without reading the answers stops being read
// (TCP then pushes back on it) instead of growing this buffer.
const maxQueuedAnswers = 64 << 10

// errAnswerDropped: a write to the connection failed, so an answer would not
// be written (the connection is being closed).
var errAnswerDropped = errors.New("connection failed, answer dropped")

// outbox writes a connection's answers. There is no writer goroutine: the
// handler that finds no write in progress writes its answer itself, and then
// whatever other handlers queued meanwhile, in one write per batch. With one
// request in flight per connection (the usual client) an answer costs one
// write syscall and no hand-over to another goroutine; with many, answers
// that are ready together still go out together.
//
// The outbox also counts the answer bytes handed to it and not yet written
// (pending: the batch being written and those queued behind it), here and
// in the server-wide total (Options.MaxAnswerBytes, MaxTotalAnswerBytes): a
// client that does not read its answers makes them pile up, and the reader
// stops taking its requests while its pending answers are over the bound
// (awaitRoom). Most answers are small, or no larger than their request
// (whose bytes the in-flight budgets bound until it is answered); those
// that may be large are admitted before they are built, so that the
// requests read before the bound was reached cannot pile up answers beyond
// it:
//   - pulls take a message only while their answers fit (admit);
//   - listings (get_default_props, messages: answers of any size that do
//     not wait for anything) are served one at a time per connection, the
//     reader taking none while one is being served (startListing) or the
//     pending answers are at the bound, and each sets its answer's
//     estimated size aside in the server-wide total before building it
//     (reserve).
type outbox struct {
	nc      net.Conn
	timeout time.Duration // bounds each write (Options.WriteTimeout)
	// onFail is called once, by the writer, when a write fails.
	onFail func(error)
	limit  int          // pending bytes beyond which awaitRoom waits (0: none)
	total  *sharedBytes // the server-wide count of pending answer bytes

	mu      sync.Mutex
	written *sync.Cond // broadcast after every batch
	queued  []byte     // answers waiting for the write in progress
	spare   []byte     // a written batch's buffer (small), for reuse
	busy    bool       // a handler is writing
	started uint64     // batches taken for writing
	done    uint64     // batches whose write returned
	// err is the first write failure, and failedAt the batch it hit:
	// answers of that batch and later ones were not (all) written.
	err      error
	failedAt uint64
	pending  int           // answer bytes handed over and not yet written or dropped
	room     chan struct{} // closed and replaced when pending, admitted, listing or reserved drops
	// admitted counts the pulls allowed to take a message whose answer is
	// not handed over yet; est is the answer size each is counted at
	// (admit).
	admitted int
	est      int
	// listing is set while a listing of this connection is being served,
	// from the reader's startListing until its answer is handed over;
	// reserved is the size its answer is counted at meanwhile (reserve),
	// also in total.
	listing  bool
	reserved int
	// peak is the most answer bytes pending and set aside at once: what
	// the bound held to (the tests check it).
	peak int
}

// Answer size estimates of admit: the first, and the least it falls to.
const (
	initialAnswerEstimate = 256 << 10
	minAnswerEstimate     = 1 << 10
)

// nextEstimate is an answer size estimate after an answer of size bytes:
// it rises to a larger answer at once and falls slowly.
func nextEstimate(est, size int) int {
	return max(size, est-est/8, minAnswerEstimate)
}

// estimate is the size answers of one kind are counted at before they are
// built (the listings' reserve): nextEstimate of the answers so far. It is
// shared by the connections: a listing answers much the same to every
// client (the default list is the server's).
type estimate struct {
	mu sync.Mutex
	n  int // 0: initialAnswerEstimate
}

func (e *estimate) get() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == 0 {
		return initialAnswerEstimate
	}
	return e.n
}

// observe takes an answer of size bytes into account.
func (e *estimate) observe(size int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == 0 {
		e.n = initialAnswerEstimate
	}
	e.n = nextEstimate(e.n, size)
}

func newOutbox(nc net.Conn, timeout time.Duration, onFail func(error)) *outbox {
	o := &outbox{nc: nc, timeout: timeout, onFail: onFail, room: make(chan struct{}), est: initialAnswerEstimate}
	o.written = sync.NewCond(&o.mu)
	return o
}

// bound sets the pending answer bytes beyond which awaitRoom waits, and the
// server-wide count they are added to.
func (o *outbox) bound(limit int, total *sharedBytes) {
	o.limit, o.total = limit, total
}

// settled takes n pending bytes off the count (written, or dropped after a
// failure) and wakes those waiting for room; o.mu held.
func (o *outbox) settledLocked(n int) {
	if n == 0 {
		return
	}
	o.pending -= n
	o.total.release(n)
	o.wakeLocked()
}

func (o *outbox) wakeLocked() {
	close(o.room)
	o.room = make(chan struct{})
}

// waitFor calls ready with o.mu held until it reports true. Until then it
// waits, o.mu unlocked, until one of the channels ready returned (this
// outbox's, the server-wide total's; nil: none) is closed, or ctx ends.
func (o *outbox) waitFor(ctx context.Context, ready func() (ok bool, mine, total <-chan struct{})) error {
	for {
		o.mu.Lock()
		ok, mine, total := ready()
		o.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-mine:
		case <-total:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// admit waits until a pull may take a message for this connection, or ctx
// ends: while the answers pending plus those of the pulls already admitted
// (each counted at the size of the recent answers) and of a listing being
// built would pass the bound, or the server-wide answers are at theirs.
// Checking the pending answers alone would not do: a client that pipelines
// a thousand pulls has them all start before the first answer is pending.
// One pull is always admitted while the pending answers are below the
// bound, whatever its answer's size. The answer then goes out with
// sendAdmitted (or the pull ends with unadmit).
//
// A pull sets nothing aside in the server-wide total: it may wait long for
// a message, and thousands of consumers waiting in long polls must not
// hold the total's room.
func (o *outbox) admit(ctx context.Context) error {
	return o.waitFor(ctx, func() (bool, <-chan struct{}, <-chan struct{}) {
		if !o.mayAdmitLocked() {
			return false, o.room, nil
		}
		if o.err == nil {
			if ok, wake := o.total.room(); !ok {
				return false, o.room, wake
			}
		}
		o.admitted++
		return true, nil, nil
	})
}

func (o *outbox) mayAdmitLocked() bool {
	switch {
	case o.limit <= 0 || o.err != nil:
		return true
	case o.admitted == 0:
		return o.pending < o.limit
	}
	return o.pending+o.reserved+(o.admitted+1)*o.est <= o.limit
}

// unadmitLocked ends an admitted pull whose answer is size bytes (0: it
// has none); the estimate rises to a larger answer at once and falls
// slowly.
func (o *outbox) unadmitLocked(size int) {
	o.admitted--
	if size > 0 {
		o.est = nextEstimate(o.est, size)
	}
	o.wakeLocked()
}

// unadmit ends an admitted pull that sends no answer.
func (o *outbox) unadmit() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.unadmitLocked(0)
}

// sendAdmitted is send for the answer of an admitted pull: it is counted as
// pending in the same step as the pull stops counting as admitted.
func (o *outbox) sendAdmitted(b []byte, wait bool) error { return o.sendAs(b, wait, answerPull) }

// startListing waits, in the reader, until no listing of this connection is
// being served (or ctx ends), and marks the one read as being served; its
// answer goes out with sendListing, which clears the mark. So a client that
// pipelines listings has one built at a time, and the others wait unread
// in its socket rather than in goroutines.
func (o *outbox) startListing(ctx context.Context) error {
	return o.waitFor(ctx, func() (bool, <-chan struct{}, <-chan struct{}) {
		if o.listing {
			return false, o.room, nil
		}
		o.listing = true
		return true, nil, nil
	})
}

// reserve waits, in the handler of the listing being served, until its
// answer, counted at n bytes, fits in the server-wide total (tryReserve),
// or ctx ends; it then sets n aside there, and in this connection's count
// for admit, until the answer is handed over (sendListing). After a failed
// write it returns errAnswerDropped at once: there is nothing to build.
func (o *outbox) reserve(ctx context.Context, n int) error {
	var failed error
	err := o.waitFor(ctx, func() (bool, <-chan struct{}, <-chan struct{}) {
		if o.err != nil {
			failed = fmt.Errorf("%w: %w", errAnswerDropped, o.err)
			return true, nil, nil
		}
		ok, wake := o.total.tryReserve(n)
		if !ok {
			return false, o.room, wake
		}
		o.reserved += n
		o.peak = max(o.peak, o.pending+o.reserved)
		return true, nil, nil
	})
	if err != nil {
		return err
	}
	return failed
}

// endListing ends the listing being served without an answer (the reader
// gave it up).
func (o *outbox) endListing() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.endListingLocked(0)
}

// endListingLocked ends the listing being served, whose answer of charged
// bytes (0: none) takes the place of what it set aside in the total.
func (o *outbox) endListingLocked(charged int) {
	o.total.exchange(o.reserved, charged)
	o.reserved, o.listing = 0, false
	o.wakeLocked()
}

// sendListing is send for the answer of the listing being served (which
// may have reserved nothing, e.g. when its arguments were refused): it is
// counted as pending in the same step as what it set aside is given back.
func (o *outbox) sendListing(b []byte) error { return o.sendAs(b, false, answerListing) }

func (o *outbox) fullLocked() bool { return o.limit > 0 && o.pending >= o.limit && o.err == nil }

// idle reports whether no answer is pending.
func (o *outbox) idle() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.pending == 0
}

// awaitRoom waits until the pending answers are below the bound (or a write
// failed: nothing will be written any more), ctx ends, or patience passes
// (0: no limit); it returns ctx's error, or errSlowReader when patience ran
// out with the answers still at the bound.
func (o *outbox) awaitRoom(ctx context.Context, patience time.Duration) error {
	var expired <-chan time.Time
	for {
		o.mu.Lock()
		if !o.fullLocked() {
			o.mu.Unlock()
			return nil
		}
		room := o.room
		o.mu.Unlock()
		if expired == nil && patience > 0 {
			t := time.NewTimer(patience)
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		case <-expired:
			return errSlowReader
		}
	}
}

// answerKind is what an answer handed to sendAs was admitted as.
type answerKind uint8

const (
	answerPlain   answerKind = iota // not admitted: small, or as large as its request
	answerPull                      // an admitted pull's (admit)
	answerListing                   // the listing being served's (startListing, reserve)
)

// send writes b, or queues it behind the write in progress. With wait, or
// when much is queued already, it returns only once b was written (or could
// not be), and then with the outcome; otherwise nil.
func (o *outbox) send(b []byte, wait bool) error { return o.sendAs(b, wait, answerPlain) }

func (o *outbox) sendAs(b []byte, wait bool, kind answerKind) error {
	o.mu.Lock()
	// Charged in the same step as its admission ends: the counts never
	// dip in between (nor count it twice).
	charged := 0
	if o.err == nil {
		charged = len(b)
		o.pending += charged
	}
	switch kind {
	case answerPull:
		o.total.charge(charged)
		o.unadmitLocked(len(b))
	case answerListing:
		o.endListingLocked(charged)
	default:
		o.total.charge(charged)
	}
	o.peak = max(o.peak, o.pending+o.reserved)
	if o.err != nil {
		err := o.err
		o.mu.Unlock()
		return err
	}
	if o.busy {
		o.queued = append(o.queued, b...)
		batch := o.started + 1
		if wait || len(o.queued) > maxQueuedAnswers {
			for o.done < batch && o.err == nil {
				o.written.Wait()
			}
		}
		err := o.outcome(batch)
		o.mu.Unlock()
		return err
	}
	// Nobody writes: write b as it is (no copy), then what queues meanwhile.
	o.busy = true
	o.started++
	mine := o.started
	var failed error
	for {
		o.mu.Unlock()
		_ = o.nc.SetWriteDeadline(time.Now().Add(o.timeout))
		_, err := o.nc.Write(b)
		o.mu.Lock()
		if err != nil && o.err == nil {
			o.err, o.failedAt = err, o.started
			failed = err
		}
		o.settledLocked(len(b))
		o.done = o.started
		o.written.Broadcast()
		if o.err != nil || len(o.queued) == 0 {
			break
		}
		// The next batch. Its buffer is reused once written, unless it grew
		// large (a big delivery): that is not kept per connection.
		b = o.queued
		o.queued = o.spare[:0]
		o.spare = nil
		if cap(b) <= maxQueuedAnswers {
			o.spare = b
		}
		o.started++
	}
	if o.err != nil {
		// Queued answers stay unwritten; their senders see o.err.
		o.settledLocked(len(o.queued))
		o.queued = nil
	}
	o.busy = false
	err := o.outcome(mine)
	o.mu.Unlock()
	if failed != nil {
		o.onFail(failed)
	}
	return err
}

// outcome is the result of batch, which has been written or failed; o.mu held.
func (o *outbox) outcome(batch uint64) error {
	if o.err != nil && batch >= o.failedAt {
		return o.err
	}
	return nil
}
