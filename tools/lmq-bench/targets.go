package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"
)

// target is one system under test. Queues are named by the bench; a target
// maps the names to its own resources.
type target interface {
	name() string
	// setup makes the queues exist, so that creating them is not timed in
	// the cells that use them.
	setup(ctx context.Context, queue string) error
	// remove deletes a queue and what is in it.
	remove(ctx context.Context, queue string) error
	// newClient returns the client of one bench client (one connection for
	// rpc). It is used by depth() goroutines at once.
	newClient(ctx context.Context) (client, error)
	// depth is the number of operations one client keeps in flight.
	depth() int
	// stateful is false for noop-http, which keeps no messages: it always has
	// one to hand out and needs no draining.
	stateful() bool
	close() error
}

// client performs operations on a target. Methods are called by depth()
// goroutines at once.
type client interface {
	push(ctx context.Context, queue string, body []byte) error
	// pull waits up to wait (0: does not wait) for a message. When none came
	// it returns a nil ack. The body is valid until the next call of the
	// same goroutine.
	pull(ctx context.Context, queue string, wait time.Duration) (body []byte, ack func(context.Context) error, err error)
	close() error
}

// sizer is implemented by targets that need to know the message size of the
// coming cell (the ceilings answer pulls with a body of that size).
type sizer interface {
	setSize(ctx context.Context, n int) error
}

// errStatus is an unexpected HTTP answer.
type errStatus struct {
	op     string
	status int
	body   string
}

func (e *errStatus) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s", e.op, e.status, e.body)
}

// httpTarget drives the LMQ HTTP API at base (the gateway, or the no-op
// handler).
type httpTarget struct {
	label string
	base  string
	hc    *http.Client
	noop  *noopServer // the ceiling inside the bench (--noop-in-process)
	ceiling
	closer func()
}

// ceiling is where a no-op target's server runs, for what the bench asks of
// it: inside the bench (size: that server's pull size) or in a child process
// (not closed here). Zero for the gateway's targets, which keep messages.
type ceiling struct {
	size  *atomic.Int64
	child *noopProc
}

func (c ceiling) stateful() bool { return c.size == nil && c.child == nil }

// setSize sets the size of the bodies the ceiling's pulls answer with.
func (c ceiling) setSize(ctx context.Context, n int) error {
	switch {
	case c.size != nil:
		c.size.Store(int64(n))
	case c.child != nil:
		return c.child.setPullSize(ctx, n)
	}
	return nil
}

// newHTTPClient is the one keep-alive client shared by all bench clients of
// an HTTP target; enough idle connections are kept so that maxConc clients
// never dial again in the middle of a cell.
func newHTTPClient(maxConc int) *http.Client {
	tr := &http.Transport{
		Proxy:               nil, // loopback only: never a proxy from the environment
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2*maxConc + 16,
		MaxIdleConnsPerHost: 2*maxConc + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr}
}

func newGatewayHTTPTarget(addr string, maxConc int) *httpTarget {
	hc := newHTTPClient(maxConc)
	return &httpTarget{label: tHTTP, base: "http://" + addr, hc: hc, closer: hc.CloseIdleConnections}
}

func (t *httpTarget) name() string { return t.label }
func (t *httpTarget) depth() int   { return 1 }

func (t *httpTarget) close() error {
	t.closer()
	if t.noop != nil {
		return t.noop.close()
	}
	return nil
}

func (t *httpTarget) messagesURL(queue string) string {
	return t.base + "/messages/" + url.PathEscape(queue)
}

// setup creates the queue with a pull that does not wait (LMQ: GET creates).
func (t *httpTarget) setup(ctx context.Context, queue string) error {
	return createByPull(ctx, &httpClient{t: t}, queue)
}

// createByPull creates queue through c the LMQ way, with a pull that does
// not wait (a pull creates the queue it names), and checks that it is empty.
func createByPull(ctx context.Context, c client, queue string) error {
	_, ack, err := c.pull(ctx, queue, 0)
	if err != nil {
		return err
	}
	if ack != nil {
		return fmt.Errorf("setup %s: fresh queue handed out a message", queue)
	}
	return nil
}

func (t *httpTarget) remove(ctx context.Context, queue string) error {
	if !t.stateful() {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, t.base+"/queues/"+url.PathEscape(queue), nil)
	if err != nil {
		return fmt.Errorf("delete %s: %w", queue, err)
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return fmt.Errorf("delete %s: %w", queue, err)
	}
	b, _ := drain(resp.Body, nil)
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotFound {
		return &errStatus{op: "delete " + queue, status: resp.StatusCode, body: snippet(b)}
	}
	return nil
}

func (t *httpTarget) newClient(context.Context) (client, error) { return &httpClient{t: t}, nil }

// httpClient is one bench client. Its buffer is reused for response bodies,
// so that reading them does not allocate per message.
type httpClient struct {
	t   *httpTarget
	buf bytes.Buffer
}

func (c *httpClient) close() error { return nil }

func (c *httpClient) push(ctx context.Context, queue string, body []byte) error {
	return c.pushTo(ctx, c.t.messagesURL(queue), body)
}

// pushGroup pushes into an ordered group of queue (?group=).
func (c *httpClient) pushGroup(ctx context.Context, queue, group string, body []byte) error {
	return c.pushTo(ctx, c.t.messagesURL(queue)+"?group="+url.QueryEscape(group), body)
}

func (c *httpClient) pushTo(ctx context.Context, u string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.t.hc.Do(req)
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	b, err := drain(resp.Body, &c.buf)
	if err != nil {
		return fmt.Errorf("push: reading answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return &errStatus{op: "push", status: resp.StatusCode, body: snippet(b)}
	}
	return nil
}

func (c *httpClient) pull(ctx context.Context, queue string, wait time.Duration) ([]byte, func(context.Context) error, error) {
	u := c.t.messagesURL(queue) + "?t=" + strconv.FormatFloat(wait.Seconds(), 'f', -1, 64)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("pull: %w", err)
	}
	resp, err := c.t.hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("pull: %w", err)
	}
	b, err := drain(resp.Body, &c.buf)
	if err != nil {
		return nil, nil, fmt.Errorf("pull: reading answer: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusNoContent:
		return nil, nil, nil
	case http.StatusOK:
	default:
		return nil, nil, &errStatus{op: "pull", status: resp.StatusCode, body: snippet(b)}
	}
	id := resp.Header.Get("X-Lmq-Message-Id")
	if id == "" {
		return nil, nil, errors.New("pull: answer without x-lmq-message-id")
	}
	ackURL := c.t.messagesURL(queue) + "/" + url.PathEscape(id) + "?reply=ack"
	ack := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, ackURL, nil)
		if err != nil {
			return fmt.Errorf("ack: %w", err)
		}
		resp, err := c.t.hc.Do(req)
		if err != nil {
			return fmt.Errorf("ack: %w", err)
		}
		// The ack answer has no body worth keeping; a scratch-free drain keeps
		// the pulled body in c.buf intact for the caller.
		rb, err := drain(resp.Body, nil)
		if err != nil {
			return fmt.Errorf("ack: reading answer: %w", err)
		}
		if resp.StatusCode != http.StatusNoContent {
			return &errStatus{op: "ack", status: resp.StatusCode, body: snippet(rb)}
		}
		return nil
	}
	return b, ack, nil
}

// drain reads and closes a response body (so the connection is reused). With
// buf, the body is kept in it and returned; without, it is discarded except
// for a short prefix for error messages.
func drain(body io.ReadCloser, buf *bytes.Buffer) ([]byte, error) {
	defer body.Close()
	if buf == nil {
		var small [256]byte
		n, _ := io.ReadFull(body, small[:])
		_, err := io.Copy(io.Discard, body)
		return small[:n], err
	}
	buf.Reset()
	_, err := buf.ReadFrom(body)
	return buf.Bytes(), err
}

func snippet(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// noopServer is the HTTP ceiling: it answers like the gateway would, without
// doing anything. It reads request bodies in full, as any real handler must.
type noopServer struct {
	srv      *http.Server
	ln       net.Listener
	pullSize atomic.Int64
	done     chan error
}

// noopMessageID is a fixed delivery id: the ceiling does not track deliveries.
const noopMessageID = "f0eca12e-19f2-4922-bcc9-6e42bd585937"

// newNoopServer starts the no-op HTTP handler on a loopback port. pullSize
// is the size of pull bodies (the noop-rpc server's in the child process, so
// that the control endpoint sets both; nil: a size of its own).
func newNoopServer(pullSize *atomic.Int64) (*noopServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("noop-http listen: %w", err)
	}
	n := &noopServer{ln: ln, done: make(chan error, 1)}
	if pullSize == nil {
		pullSize = &n.pullSize
		pullSize.Store(256)
	}
	mux := http.NewServeMux()
	pushAnswer := []byte(`{"accum":"no"}`)
	mux.HandleFunc("POST /messages/{name}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(pushAnswer)
	})
	// One body per size, built once and shared: the handler must not cost
	// more than a real one would.
	var bodies atomic.Pointer[[]byte]
	mux.HandleFunc("GET /messages/{name}", func(w http.ResponseWriter, r *http.Request) {
		size := int(pullSize.Load())
		bp := bodies.Load()
		if bp == nil || len(*bp) != size {
			b := bytes.Repeat([]byte{'x'}, size)
			bp = &b
			bodies.Store(bp)
		}
		h := w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("X-Lmq-Queue-Name", r.PathValue("name"))
		h.Set("X-Lmq-Message-Id", noopMessageID)
		h.Set("X-Lmq-Message-Type", "normal")
		h.Set("X-Lmq-Retry-Remaining", "2")
		_, _ = w.Write(*bp)
	})
	mux.HandleFunc("POST /messages/{name}/{id}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})
	// The bench sets the pull size of the coming cell here when the
	// ceilings run in their own process (noop_proc.go).
	mux.HandleFunc("POST "+noopPullSizePath, func(w http.ResponseWriter, r *http.Request) {
		v, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil || v < 0 {
			http.Error(w, "n: want a size in bytes", http.StatusBadRequest)
			return
		}
		pullSize.Store(int64(v))
		w.WriteHeader(http.StatusNoContent)
	})
	n.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { n.done <- n.srv.Serve(ln) }()
	return n, nil
}

func (n *noopServer) addr() string { return n.ln.Addr().String() }

// newNoopHTTPTarget starts the HTTP ceiling inside the bench.
func newNoopHTTPTarget(maxConc int) (*httpTarget, error) {
	n, err := newNoopServer(nil)
	if err != nil {
		return nil, err
	}
	hc := newHTTPClient(maxConc)
	return &httpTarget{
		label:   tNoop,
		base:    "http://" + n.addr(),
		hc:      hc,
		noop:    n,
		ceiling: ceiling{size: &n.pullSize},
		closer:  hc.CloseIdleConnections,
	}, nil
}

// newChildNoopHTTPTarget drives the HTTP ceiling of the child process p.
func newChildNoopHTTPTarget(p *noopProc, maxConc int) *httpTarget {
	hc := newHTTPClient(maxConc)
	return &httpTarget{
		label:   tNoop,
		base:    "http://" + p.httpAddr,
		hc:      hc,
		ceiling: ceiling{child: p},
		closer:  hc.CloseIdleConnections,
	}
}

func (n *noopServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("noop-http shutdown: %w", err)
	}
	if err := <-n.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("noop-http serve: %w", err)
	}
	return nil
}
