// Package testcore starts a real gateway core for the tests of the packages
// built around it (front ends, tokens, upgrade, migrate): the same few lines
// each of them would otherwise repeat.
package testcore

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// startTimeout bounds a core's start. Generous: tests run in parallel on a
// loaded machine, and a start that fails says why at once.
const startTimeout = time.Minute

// New starts a core on nc with cfg. It is closed when the test ends.
func New(t testing.TB, nc *nats.Conn, cfg gateway.Config) *gateway.Gateway {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	g, err := gateway.New(ctx, bus.New(nc), cfg)
	if err != nil {
		t.Fatalf("start the core: %v", err)
	}
	t.Cleanup(g.Close)
	return g
}
