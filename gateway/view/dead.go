package view

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	st, err := r.core.Stream(ctx, queue)
	if err != nil {
		return nil, err
	}
	raw, err := st.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(mapping.DeadSubject(queue)))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, store.Classify("read dead letter", err)
	}
	m := &nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data}
	c, err := r.core.Store.Decode(ctx, m)
	if err != nil {
		return nil, err
	}
	d := &Dead{Content: c, Seq: raw.Sequence}
	d.Deliveries = store.ReadStamps(raw.Header).Delivered
	d.DiedAt, _ = time.Parse(time.RFC3339Nano, raw.Header.Get(mapping.HdrDeadAt))
	return d, nil
}
