package main

import (
	"context"
	"fmt"
	"log/slog"
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
		select {
		case <-ctx.Done():
		case <-time.After(startRetryPause):
		}
	}
	return zero, fmt.Errorf("start %s: %w", what, err)
}
