package rpc

import (
	"context"
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
// stops taking its requests, and pulls stop taking messages for it, while
// its pending answers are over the bound (awaitRoom).
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
	room     chan struct{} // closed and replaced when pending or admitted drops
	// admitted counts the pulls allowed to take a message whose answer is
	// not handed over yet; est is the answer size each is counted at
	// (admit).
	admitted int
	est      int
}

// Answer size estimates of admit: the first, and the least it falls to.
const (
	initialAnswerEstimate = 256 << 10
	minAnswerEstimate     = 1 << 10
)

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

// admit waits until a pull may take a message for this connection, or ctx
// ends: while the answers pending plus those of the pulls already admitted
// (each counted at the size of the recent answers) would pass the bound.
// Checking the pending answers alone would not do: a client that pipelines
// a thousand pulls has them all start before the first answer is pending.
// One pull is always admitted while the pending answers are below the
// bound, whatever its answer's size. The answer then goes out with
// sendAdmitted (or the pull ends with unadmit).
func (o *outbox) admit(ctx context.Context) error {
	return waitUntil(ctx, &o.mu, func() (bool, <-chan struct{}) {
		if o.mayAdmitLocked() {
			o.admitted++
			return true, nil
		}
		return false, o.room
	})
}

func (o *outbox) mayAdmitLocked() bool {
	switch {
	case o.limit <= 0 || o.err != nil:
		return true
	case o.admitted == 0:
		return o.pending < o.limit
	}
	return o.pending+(o.admitted+1)*o.est <= o.limit
}

// unadmitLocked ends an admitted pull whose answer is size bytes (0: it
// has none); the estimate rises to a larger answer at once and falls
// slowly.
func (o *outbox) unadmitLocked(size int) {
	o.admitted--
	if size > 0 {
		o.est = max(size, o.est-o.est/8, minAnswerEstimate)
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
func (o *outbox) sendAdmitted(b []byte, wait bool) error { return o.sendAs(b, wait, true) }

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

// send writes b, or queues it behind the write in progress. With wait, or
// when much is queued already, it returns only once b was written (or could
// not be), and then with the outcome; otherwise nil.
func (o *outbox) send(b []byte, wait bool) error { return o.sendAs(b, wait, false) }

func (o *outbox) sendAs(b []byte, wait, admitted bool) error {
	o.mu.Lock()
	if admitted {
		o.unadmitLocked(len(b))
	}
	if o.err != nil {
		err := o.err
		o.mu.Unlock()
		return err
	}
	o.pending += len(b)
	o.total.charge(len(b))
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
