package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// What nats-server 2.15 does when its disk is full: a write to a stream's
// file store that fails (ENOSPC: "no space left on device") is a "critical
// write error". The file store keeps the error and answers it to every later
// write, the stream keeps it too and stops answering publishes at all (the
// publisher waits for its PubAck in vain), and nothing clears it but
// reopening the store: freeing space does not help. (A stream that sources or
// mirrors others disables all of JetStream instead.) A server restart cures
// it, and so does stopping and starting JetStream within the running server,
// which reopens every stream from its files: what was acknowledged before is
// kept, and a record half-written at the failure is cut off. The watchdog
// below does the latter once the disk takes writes again.
//
// Running out of JetStream's own limit (max_file_store, Options.MaxStore:
// storelimit.go) is different and needs no help: the publish is refused
// with "insufficient resources" and succeeds again once messages are
// removed.

// defaultStoreCheck is how often the watchdog looks at the streams.
const defaultStoreCheck = 2 * time.Second

// spaceProbeSize is written (and removed) to tell whether the disk takes
// writes again: about a file store block's worth of writes.
const spaceProbeSize = 1 << 20

// ErrStore is wrapped by StoreError's answers.
var ErrStore = errors.New("jetstream store failed")

// storeWatch is the embedded server's store watchdog.
type storeWatch struct {
	srv      *server.Server
	dir      string
	cfg      server.JetStreamConfig
	interval time.Duration
	log      *slog.Logger

	mu       sync.Mutex
	err      error // the standing store failure, nil when healthy
	restarts int

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func startStoreWatch(srv *server.Server, dir string, interval time.Duration, log *slog.Logger) *storeWatch {
	if interval <= 0 {
		interval = defaultStoreCheck
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &storeWatch{srv: srv, dir: dir, interval: interval, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	// The configuration JetStream started with, limits included, is the one
	// a restart reuses: the storage limit decided at the process's start
	// (storelimit.go), not one computed again from the space free now, which
	// on a full disk would be below what the store holds.
	if cfg := srv.JetStreamConfig(); cfg != nil {
		w.cfg = *cfg
	}
	// EnableJetStream appends "jetstream" to the directory it is given, as
	// it did at the first start: give it the same directory as then.
	w.cfg.StoreDir = dir
	go w.run()
	return w
}

// close stops the watchdog and waits for it to end; a second call does
// nothing.
func (w *storeWatch) close() {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
}

func (w *storeWatch) run() {
	defer close(w.done)
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		w.check()
	}
}

// check looks for a store failure and, once the disk takes writes again,
// restarts JetStream to clear it.
func (w *storeWatch) check() {
	err := w.failure()
	w.set(err)
	if err == nil {
		return
	}
	if w.srv.JetStreamIsClustered() {
		// A cluster node's stream with a write error steps down and becomes
		// an observer; its replicas elsewhere carry on. Restarting this
		// node's JetStream is left to the operator.
		return
	}
	if perr := w.probeSpace(); perr != nil {
		return // still full: the failure stands, readiness says so
	}
	w.log.Warn("the disk takes writes again: restarting JetStream to clear its write errors", "err", err)
	if err := w.restart(); err != nil {
		w.log.Error("restarting JetStream failed; trying again", "err", err)
		w.set(fmt.Errorf("%w: restarting JetStream: %w", ErrStore, err))
		return
	}
	err = w.failure()
	w.set(err)
	if err == nil {
		w.log.Info("JetStream restarted; the streams take writes again")
	}
}

// restart stops JetStream and starts it again within the running server:
// every stream and consumer is reopened from its files. Clients stay
// connected; requests in flight meanwhile go unanswered (time out).
func (w *storeWatch) restart() error {
	if err := w.srv.ShutdownJetStream(); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	cfg := w.cfg
	if err := w.srv.EnableJetStream(&cfg); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	w.mu.Lock()
	w.restarts++
	w.mu.Unlock()
	return nil
}

// failure is the server's store failure now: JetStream disabled (by the
// server itself after a write error), or a stream holding a write error.
func (w *storeWatch) failure() error {
	if !w.srv.JetStreamEnabled() {
		return fmt.Errorf("%w: JetStream is disabled", ErrStore)
	}
	h := w.srv.Healthz(&server.HealthzOptions{})
	if h == nil || h.Error == "" {
		return nil
	}
	// Only write errors: the health check also reports passing states (a
	// stream still being recovered) that a restart would not help.
	if strings.Contains(h.Error, "write error") {
		return fmt.Errorf("%w: %s", ErrStore, h.Error)
	}
	return nil
}

func (w *storeWatch) set(err error) {
	w.mu.Lock()
	prev := w.err
	w.err = err
	w.mu.Unlock()
	if err != nil && prev == nil {
		w.log.Error("JetStream cannot store; waiting for disk space", "err", err)
	}
}

// probeSpace writes and removes a small file in the data directory: does
// the disk take writes again?
func (w *storeWatch) probeSpace() error {
	f, err := os.CreateTemp(w.dir, ".lmq-space-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	defer os.Remove(name)
	_, err = f.Write(make([]byte, spaceProbeSize))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// StoreError is the embedded server's standing store failure (a stream
// that hit a write error, such as a full disk, or JetStream disabled), nil
// when there is none. The server recovers by itself once the disk takes
// writes again (within a few seconds); meanwhile writes fail.
func (s *Server) StoreError() error {
	if s.watch == nil {
		return nil
	}
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	return s.watch.err
}

// StoreRestarts counts the JetStream restarts that cleared store failures.
func (s *Server) StoreRestarts() int {
	if s.watch == nil {
		return 0
	}
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	return s.watch.restarts
}
