package embedded

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lifecycle"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/logbuf"
)

// freeAddr is a loopback address whose port was free a moment ago: a fixed
// one, so that a test can check it is bound, then free again.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", anyPort)
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// mustBeFree fails the test when addr cannot be bound: something (the
// server) still listens there.
func mustBeFree(t *testing.T, addr, when string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("%s: %s is still bound: %v", when, addr, err)
	}
	l.Close()
}

// TestServiceContract: a Server is a lifecycle.Service. New starts
// nothing, Start serves, Stop frees the port and the data directory (a
// second Stop does nothing) and a stopped server does not start again.
func TestServiceContract(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := freeAddr(t)
	var svc lifecycle.Service = New(Options{DataDir: dir, Listen: addr, ClientAuth: ClientAuth{None: true}})
	mustBeFree(t, addr, "after New")
	if err := svc.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	connect(t, "nats://"+addr, "after Start")
	svc.Stop()
	mustBeFree(t, addr, "after Stop")
	svc.Stop()
	if err := svc.Start(t.Context()); err == nil {
		t.Fatal("a stopped server started again")
	}
	// The directory is free again: another server starts on it.
	start(t, Options{DataDir: dir})
	// Stop on a server that never started does nothing.
	New(Options{DataDir: t.TempDir()}).Stop()
}

// cancelOn is a slog handler that calls cancel when a record's message
// begins with prefix, and passes every record on to Handler.
type cancelOn struct {
	slog.Handler
	prefix string
	cancel context.CancelFunc
}

func (h cancelOn) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.cancel()
	}
	return h.Handler.Handle(ctx, r)
}

func (h cancelOn) WithAttrs(as []slog.Attr) slog.Handler {
	return cancelOn{h.Handler.WithAttrs(as), h.prefix, h.cancel}
}

func (h cancelOn) WithGroup(name string) slog.Handler {
	return cancelOn{h.Handler.WithGroup(name), h.prefix, h.cancel}
}

// TestFailedStartLeavesNothing: a Start that fails once nats-server is
// listening (its wait for readiness runs out, or its context ends) stops
// the server again: the client port is free, the directory unlocked, and
// Start's error says why.
func TestFailedStartLeavesNothing(t *testing.T) {
	t.Parallel()
	const listening = "Listening for client connections on "
	for _, tc := range []struct {
		name string
		// timeout is Options.StartTimeout; cancelAt cancels Start's context
		// when the server logs a line beginning with it.
		timeout  time.Duration
		cancelAt string
		want     func(error) bool
	}{
		{"not ready in time", time.Nanosecond, "",
			func(err error) bool { return strings.Contains(err.Error(), "not ready in time") }},
		{"start cancelled", 0, listening,
			func(err error) bool { return errors.Is(err, context.Canceled) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			addr := freeAddr(t)
			var logs logbuf.Buffer
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			h := slog.Handler(slog.NewTextHandler(&logs, nil))
			if tc.cancelAt != "" {
				h = cancelOn{Handler: h, prefix: tc.cancelAt, cancel: cancel}
			}
			s := New(Options{DataDir: dir, Listen: addr, ClientAuth: ClientAuth{None: true},
				StartTimeout: tc.timeout, Logger: slog.New(h)})
			err := s.Start(ctx)
			if err == nil {
				s.Stop()
				t.Fatal("started")
			}
			if !tc.want(err) {
				t.Fatalf("Start: %v", err)
			}
			// The server did listen before the start failed: what is
			// checked next was undone, not never done.
			if !strings.Contains(logs.String(), listening+addr) {
				t.Fatalf("the server never listened on %s; its log:\n%s", addr, logs.String())
			}
			mustBeFree(t, addr, "after the failed Start")
			start(t, Options{DataDir: dir})
		})
	}
}
