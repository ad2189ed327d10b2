package view

import (
	"context"
	"fmt"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// Dead is a dead letter as stored: its content, the deliveries it had and
// when it died (zero when unknown). Dead letters live in the queue's own
// stream on a subject its consumers do not see (mapping.DeadSubject).
type Dead struct {
	Content    store.Content
	Deliveries int
	DiedAt     time.Time
	// Seq is its stream sequence.
	Seq uint64
}

// DeadHead returns the oldest dead letter of queue, nil when none.
func (r *Reader) DeadHead(ctx context.Context, queue string) (*Dead, error) {
	sh, err := r.core.Shard(ctx, queue)
	if err != nil {
		return nil, err
	}
	raw, err := sh.Next(ctx, mapping.DeadSubject(queue), 1)
	if err != nil {
		return nil, fmt.Errorf("read dead letter: %w", err)
	}
	if raw == nil {
		return nil, nil
	}
	c, err := r.core.Store.DecodeStored(ctx, raw)
	if err != nil {
		return nil, err
	}
	d := &Dead{Content: c, Seq: raw.Seq}
	d.Deliveries = store.ReadStamps(raw.Header).Delivered
	d.DiedAt, _ = time.Parse(time.RFC3339Nano, raw.Header.Get(mapping.HdrDeadAt))
	return d, nil
}
