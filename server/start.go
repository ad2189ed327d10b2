package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Start-up retries (see retryStart).
const (
	startAttempts       = 5
	startAttemptTimeout = 3 * time.Second
	startRetryPause     = time.Second
)

// retryStart runs fn, the creation of what the gateway needs in JetStream,
// with a bounded time per attempt, and tries again after a failure. In a
// cluster that has just elected its leader, several gateways creating the
// same replicated stream at once (the properties bucket, at start) can each
// be left without an answer but one: nats-server 2.15.2 answers the first
// request and drops the others, whose callers then wait for their deadline.
// Asking again succeeds at once. Errors that persist end the start after
// startAttempts, so a bad setting (say --replicas 3 on a single node) is
// still reported within a minute.
func retryStart[T any](ctx context.Context, log *slog.Logger, what string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		actx, cancel := context.WithTimeout(ctx, startAttemptTimeout)
		var v T
		v, err = fn(actx)
		cancel()
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			break
		}
		log.Warn("start failed; retrying", "what", what, "attempt", attempt, "err", err)
		t := time.NewTimer(startRetryPause)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return zero, fmt.Errorf("start %s: %w", what, err)
}

// logRPCExposure says loudly when the RPC port, listening on addr, takes
// requests from anyone who reaches it.
func (s *Server) logRPCExposure(addr net.Addr) {
	httpAuth := s.cfg.Auth.Enabled()
	if s.cfg.RPCClientCA != "" {
		s.log.Info("MessagePack-RPC requires client certificates", "rpc", addr.String(), "ca", s.cfg.RPCClientCA)
		return
	}
	ta, ok := addr.(*net.TCPAddr)
	if ok && ta.IP.IsLoopback() {
		if httpAuth {
			s.log.Info("MessagePack-RPC has no authentication; it listens on loopback only, so local users can use it without the HTTP credential",
				"rpc", addr.String())
		}
		return
	}
	s.log.Warn("MessagePack-RPC IS OPEN: it has no authentication, and anyone who reaches this address can push, pull and delete every queue"+
		" (bind it to loopback with --rpc-listen 127.0.0.1:18800, turn it off with --rpc-listen \"\", or require client certificates with --rpc-tls-client-ca)",
		"rpc", addr.String(), "http_auth", httpAuth, "tls", s.cfg.RPCTLS != nil)
}
