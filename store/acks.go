package store

import (
	"context"
	"fmt"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// Acknowledgements of deliveries of the queues' consumers: the core decides
// when a delivery ends or lives on; how that is said to JetStream is here.

// Ack acknowledges the delivery m (on a work-queue stream: removes the
// message) and waits for JetStream's answer, within ctx.
func (s *Store) Ack(ctx context.Context, m *bus.Msg) error {
	if _, err := s.nc.RequestWithContext(ctx, m.Reply, jsapi.AckBody); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	return nil
}

// AckWithin is Ack bounded by timeout rather than a context (no context and
// timer made per ack on the hot path).
func (s *Store) AckWithin(m *bus.Msg, timeout time.Duration) error {
	if _, err := s.nc.Request(m.Reply, jsapi.AckBody, timeout); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	return nil
}

// Progress restarts the AckWait of the delivery m (JetStream's backstop
// clock), without waiting for an answer.
func (s *Store) Progress(m *bus.Msg) error {
	if err := s.nc.Publish(m.Reply, jsapi.ProgressBody); err != nil {
		return fmt.Errorf("progress: %w", err)
	}
	return nil
}
