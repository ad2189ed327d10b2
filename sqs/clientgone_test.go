package sqs_test

// A client that goes away is not a server failure (issue 40, item 6).

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testcore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/sqs"
)

// goneLog is a log written by several handlers at once.
type goneLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *goneLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *goneLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// goneStatus records the status a handler answered.
type goneStatus struct {
	http.ResponseWriter
	status int
}

func (w *goneStatus) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *goneStatus) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (w *goneStatus) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// goneHeader marks a request whose serving starts only once its client
// left (see goneServer).
const goneHeader = "X-Test-Serve-After-Client-Left"

// goneServer serves the SQS API on a real core and a real listener,
// logging at debug level into log. A request marked with goneHeader (a GET:
// net/http watches for the client's leaving once the body is read) says so
// on arrived, and is handed to the SQS handler once net/http has cancelled
// its context because its client closed the connection; its status goes to
// done. That is what happens when a client aborts a request (a long poll it
// stops) just as it arrives, before the handler has read the queue, which
// the real timing produces now and then (5 times in 30 aborts by
// sqs-consumer).
func goneServer(t *testing.T, log *goneLog) (srv *httptest.Server, core *gateway.Gateway, arrived chan struct{}, done chan int) {
	t.Helper()
	nc := testnats.Connect(t, testnats.Start(t), "sqs")
	core = testcore.New(t, nc, gateway.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	h := sqs.New(sqs.CoreOf(core), sqs.Options{Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	arrived, done = make(chan struct{}, 1), make(chan int, 1)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(goneHeader) == "" {
			h.ServeHTTP(w, r)
			return
		}
		arrived <- struct{}{}
		<-r.Context().Done()
		rec := &goneStatus{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		done <- rec.status
	}))
	t.Cleanup(srv.Close)
	return srv, core, arrived, done
}

// goneCall sends a query-protocol request (as a GET) and returns its status
// and body.
func goneCall(t *testing.T, ctx context.Context, srv *httptest.Server, v url.Values, hdr ...string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/?"+v.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestClientGoneIsNoFailure: requests whose client went away, a long poll
// aborted while it waits or as it arrives, and other actions, are neither
// answered 500 nor logged as failures (no WARN "sqs request failed"); they
// are logged at debug level and recorded as 499, as the HTTP API does.
func TestClientGoneIsNoFailure(t *testing.T) {
	t.Parallel()
	log := &goneLog{}
	srv, core, arrived, done := goneServer(t, log)
	ctx := t.Context()
	if st, body, err := goneCall(t, ctx, srv, url.Values{"Action": {"CreateQueue"}, "QueueName": {"gone"}}); err != nil || st != http.StatusOK {
		t.Fatalf("CreateQueue: %d %s %v", st, body, err)
	}
	qurl := srv.URL + "/000000000000/gone"
	poll := url.Values{"Action": {"ReceiveMessage"}, "QueueUrl": {qurl}, "WaitTimeSeconds": {"20"}}

	// A long poll aborted while it waits.
	pctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	parked := &gateway.Signals(core).Dispatch.WaiterParked
	parked.Init(t)
	go func() {
		_, _, err := goneCall(t, pctx, srv, poll)
		errc <- err
	}()
	parked.WaitFor("the long poll waiting", func(p dispatch.Parked) bool { return !p.NoWait })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("the aborted long poll: %v", err)
	}
	testwait.For(t, "the aborted long poll's end", func() bool { return core.Inspect().WaitingPulls() == 0 })

	// Aborted as they arrive: a long poll, and actions that change state.
	for _, v := range []url.Values{
		poll,
		{"Action": {"GetQueueAttributes"}, "QueueUrl": {qurl}, "AttributeName.1": {"All"}},
		{"Action": {"SendMessage"}, "QueueUrl": {qurl}, "MessageBody": {"x"}},
		{"Action": {"PurgeQueue"}, "QueueUrl": {qurl}},
	} {
		actx, abort := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			_, _, err := goneCall(t, actx, srv, v, goneHeader, "1")
			errc <- err
		}()
		// The request is in the server's hands; the client then leaves.
		<-arrived
		abort()
		<-errc
		if st := <-done; st >= 500 {
			t.Errorf("%s whose client left: answered %d", v.Get("Action"), st)
		}
	}
	out := log.String()
	if strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") || strings.Contains(out, "status=500") {
		t.Errorf("a client that left was logged as a failure:\n%s", out)
	}
	if !strings.Contains(out, `msg="sqs client went away"`) {
		t.Errorf("no debug line for the clients that left:\n%s", out)
	}
}
