package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// Timeouts bound the phases of a request after its headers (whose time
// http.Server.ReadHeaderTimeout bounds). http.Server's ReadTimeout and
// WriteTimeout cannot be used: they count from the start of the request, and
// a pull may wait for a message as long as its client wants (LMQ's
// contract). So the body and the answer are bounded while they are being
// transferred, through http.ResponseController's per-request deadlines. The
// zero value bounds nothing.
type Timeouts struct {
	// BodyIdle is the longest wait for the next bytes of a request body.
	BodyIdle time.Duration
	// MinRate (bytes per second) is the slowest a request body or an answer
	// may be transferred on average. For a body it counts the time spent
	// waiting for the client only (not the time the handler spends between
	// reads), after a grace of BodyIdle; for an answer, each write gets
	// Write plus its size at this rate.
	MinRate int64
	// Write bounds writing an answer: each write of the handler must finish
	// within Write (plus its size at MinRate) of its start.
	Write time.Duration
}

// bodyGraceWithoutIdle is the grace of MinRate when BodyIdle is off.
const bodyGraceWithoutIdle = 30 * time.Second

// withTimeouts applies to to every request of next. Handlers read r.Body as
// usual; a body too slow fails their read with a *statusError 408, which
// reaches the client through fail (readBody wraps it with %w).
//
// Note for whoever streams bodies (large messages to the Object Store): read
// r.Body as handed over, between reads taking the time the store needs (that
// time is not counted against the client), and keep errors.As(err,
// *statusError) working on read errors so that a cut body answers 408.
func withTimeouts(next http.Handler, to Timeouts) http.Handler {
	if to.BodyIdle <= 0 && to.MinRate <= 0 && to.Write <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if (to.BodyIdle > 0 || to.MinRate > 0) && r.Body != nil && r.Body != http.NoBody {
			r.Body = &timedBody{ReadCloser: r.Body, rc: rc, to: to}
		}
		if to.Write <= 0 {
			next.ServeHTTP(w, r)
			return
		}
		tw := &timedWriter{ResponseWriter: w, rc: rc, to: to}
		next.ServeHTTP(tw, r)
		if tw.headerPending {
			// A status without a body (204, …): net/http writes it now,
			// after the handler.
			tw.arm(0)
		}
	})
}

// timedBody sets the connection's read deadline before each read of the
// body, and clears it at the end of the body: after that, net/http reads the
// connection in the background to notice a client leaving, and an old
// deadline would end a pull waiting for a message.
type timedBody struct {
	io.ReadCloser
	rc *http.ResponseController
	to Timeouts

	read   int64         // bytes read so far
	waited time.Duration // time spent in reads so far
	done   bool          // EOF, an error, or deadlines unsupported
}

func (b *timedBody) Read(p []byte) (int, error) {
	if b.done {
		return b.ReadCloser.Read(p)
	}
	allow := b.allowance()
	if allow <= 0 {
		b.done = true
		return 0, b.tooSlow()
	}
	if err := b.rc.SetReadDeadline(time.Now().Add(allow)); err != nil {
		// Not an HTTP/1 or HTTP/2 connection of net/http (a test recorder):
		// nothing to bound.
		b.done = true
		return b.ReadCloser.Read(p)
	}
	start := time.Now()
	n, err := b.ReadCloser.Read(p)
	b.waited += time.Since(start)
	b.read += int64(n)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.done = true
		return n, b.tooSlow()
	default:
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// allowance is how long the next read may wait: BodyIdle, and no longer than
// keeps the body at MinRate on average over the time waited (after a grace).
func (b *timedBody) allowance() time.Duration {
	allow := b.to.BodyIdle
	if b.to.MinRate > 0 {
		grace := b.to.BodyIdle
		if grace <= 0 {
			grace = bodyGraceWithoutIdle
		}
		earned := grace + time.Duration(float64(b.read)/float64(b.to.MinRate)*float64(time.Second)) - b.waited
		if allow <= 0 || earned < allow {
			allow = earned
		}
	}
	return allow
}

func (b *timedBody) tooSlow() error {
	if b.to.MinRate > 0 {
		return &statusError{http.StatusRequestTimeout, fmt.Sprintf(
			"request body too slow: %d bytes in %v (stalled longer than %v, or under %d bytes/s)",
			b.read, b.waited.Round(time.Millisecond), b.to.BodyIdle, b.to.MinRate)}
	}
	return &statusError{http.StatusRequestTimeout, fmt.Sprintf(
		"request body stalled: no bytes for %v (after %d bytes)", b.to.BodyIdle, b.read)}
}

// timedWriter sets the connection's write deadline before each write of the
// answer, so that a client not reading it cannot hold the connection, while
// the time a pull waits before answering is not counted. net/http clears the
// deadline once the answer is complete, before the next request.
//
// WriteHeader writes nothing to the connection (net/http sends the status
// line with the first bytes of the body, or after the handler returns), so
// it does not set a deadline of its own: the first Write does, or, for an
// answer without a body, withTimeouts after the handler. That is one deadline
// per answer instead of two, the same bound.
type timedWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	to Timeouts
	// headerPending: WriteHeader was called and no Write since.
	headerPending bool
}

func (w *timedWriter) arm(size int) {
	d := w.to.Write
	if w.to.MinRate > 0 {
		d += time.Duration(float64(size) / float64(w.to.MinRate) * float64(time.Second))
	}
	_ = w.rc.SetWriteDeadline(time.Now().Add(d))
}

func (w *timedWriter) WriteHeader(code int) {
	if code < http.StatusOK {
		// An informational status (1xx) is written at once.
		w.arm(0)
	} else {
		w.headerPending = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *timedWriter) Write(p []byte) (int, error) {
	w.headerPending = false
	w.arm(len(p))
	return w.ResponseWriter.Write(p)
}

// FlushError sends what is buffered (http.ResponseController.Flush), under
// a deadline when only the status is pending.
func (w *timedWriter) FlushError() error {
	if w.headerPending {
		w.headerPending = false
		w.arm(0)
	}
	return w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *timedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
