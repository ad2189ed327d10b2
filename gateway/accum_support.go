package gateway

import (
	"context"

	"github.com/nats-io/nats.go"
)

// DropObject deletes the Object Store body that a message built by
// EncodeMessage refers to, if any (a missing object is not an error). The
// accumulator uses it for the bodies of parts once their compound message is
// stored, and for a compound body it built but did not store.
func (g *Gateway) DropObject(ctx context.Context, m *nats.Msg) { g.dropObject(ctx, m) }
