package rpc

import (
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
type outbox struct {
	nc      net.Conn
	timeout time.Duration // bounds each write (Options.WriteTimeout)
	// onFail is called once, by the writer, when a write fails.
	onFail func(error)

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
}

func newOutbox(nc net.Conn, timeout time.Duration, onFail func(error)) *outbox {
	o := &outbox{nc: nc, timeout: timeout, onFail: onFail}
	o.written = sync.NewCond(&o.mu)
	return o
}

// send writes b, or queues it behind the write in progress. With wait, or
// when much is queued already, it returns only once b was written (or could
// not be), and then with the outcome; otherwise nil.
func (o *outbox) send(b []byte, wait bool) error {
	o.mu.Lock()
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
