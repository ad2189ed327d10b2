package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// checkDataDir creates dir if needed and proves that files can be written
// in it, so that a directory JetStream cannot use fails the start at once
// with a message naming the flag (nats-server would log it and never become
// ready).
func checkDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("embedded: --data-dir %s cannot be created: %w", dir, unwrapPath(err, dir))
	}
	f, err := os.CreateTemp(dir, ".write-probe-*")
	if err != nil {
		return fmt.Errorf("embedded: --data-dir %s is not writable: %w", dir, unwrapPath(err, dir))
	}
	name := f.Name()
	_, werr := f.Write([]byte("probe\n"))
	cerr := f.Close()
	_ = os.Remove(name)
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("embedded: --data-dir %s is not writable: %w", dir, unwrapPath(err, dir))
	}
	return nil
}

// unwrapPath drops the *os.PathError around err when it names dir, which
// the message names already.
func unwrapPath(err error, dir string) error {
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Path == dir {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// checkListen binds addr for a moment, so that a port in use fails the start
// at once with a message naming flag and what to do (hint). Port 0 always
// binds.
func checkListen(addr, flag, hint string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("embedded: %s %s: address already in use (%s)", flag, addr, hint)
		}
		return fmt.Errorf("embedded: %s %s: %w", flag, addr, err)
	}
	return l.Close()
}

// awaitReady waits until srv accepts connections, or fails as soon as the
// server reports a fatal error (sent on fatal), or ctx ends, or after
// timeout (default 30s).
func awaitReady(ctx context.Context, srv *server.Server, timeout time.Duration, fatal <-chan string) error {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case msg := <-fatal:
			return fmt.Errorf("embedded: nats-server failed to start: %s", msg)
		default:
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("embedded: nats-server start: %w", err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return errors.New("embedded: nats-server not ready in time")
		}
		// Short slices, so that a fatal error or ctx ends the wait promptly.
		if srv.ReadyForConnections(min(left, 100*time.Millisecond)) {
			select {
			case msg := <-fatal:
				return fmt.Errorf("embedded: nats-server failed to start: %s", msg)
			default:
				return nil
			}
		}
	}
}
