package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// What JetStream knows about queues, for introspection and statistics.

// QueueInfo is what JetStream knows about a queue.
type QueueInfo struct {
	Name string
	// Size counts messages waiting and in flight (LMQ's size), compound
	// messages as one; parts of open accumulation windows are not counted.
	Size uint64
	// Bytes stored for the queue, parts of open windows included.
	Bytes uint64
	// InFlight are messages delivered and not yet acked.
	InFlight uint64
	// Props are the effective properties.
	Props mapping.Effective
}

// QueueStatus is QueueInfo plus where the queue's stream is stored.
type QueueStatus struct {
	QueueInfo
	// Nodes are the NATS servers storing the queue's stream, leader first;
	// empty outside a cluster.
	Nodes []string
	// Current lists the Nodes that are up to date.
	Current []string
}

// Queue returns JetStream's view of one queue; ErrNotFound if it does not exist.
func (g *Gateway) Queue(ctx context.Context, queue string) (QueueInfo, error) {
	s, err := g.QueueStatus(ctx, queue)
	return s.QueueInfo, err
}

// QueueStatus returns JetStream's view of one queue with its placement, from
// one look at the stream and one at its consumer; ErrNotFound if it does not
// exist.
func (g *Gateway) QueueStatus(ctx context.Context, queue string) (QueueStatus, error) {
	if err := validName(queue); err != nil {
		return QueueStatus{}, err
	}
	st, err := g.js.Stream(ctx, mapping.StreamName(queue))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return QueueStatus{}, fmt.Errorf("queue %q: %w", queue, ErrNotFound)
	}
	if err != nil {
		return QueueStatus{}, jsErr("queue info", err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(mapping.QueueSubject(queue)))
	if err != nil {
		return QueueStatus{}, jsErr("queue info", err)
	}
	s := QueueStatus{
		QueueInfo: QueueInfo{
			Name:  queue,
			Size:  info.State.Subjects[mapping.QueueSubject(queue)],
			Bytes: info.State.Bytes,
			Props: g.props.effective(queue),
		},
		Nodes:   []string{},
		Current: []string{},
	}
	if c, err := st.Consumer(ctx, mapping.ConsumerName); err == nil {
		s.InFlight = uint64(c.CachedInfo().NumAckPending)
	}
	if ci := info.Cluster; ci != nil {
		if ci.Leader != "" {
			s.Nodes = append(s.Nodes, ci.Leader)
			s.Current = append(s.Current, ci.Leader)
		}
		for _, p := range ci.Replicas {
			if p == nil {
				continue
			}
			s.Nodes = append(s.Nodes, p.Name)
			if p.Current && !p.Offline {
				s.Current = append(s.Current, p.Name)
			}
		}
	}
	return s, nil
}

// QueueDetail is the introspection view of one queue.
type QueueDetail struct {
	QueueInfo
	// Delayed messages not yet due.
	Delayed uint64
	// DeadLetters kept for the queue.
	DeadLetters uint64
	// Parts waiting in open accumulation windows.
	Parts uint64
}

// QueueDetail reports a queue's sizes by kind; ErrNotFound if it does not exist.
func (g *Gateway) QueueDetail(ctx context.Context, queue string) (QueueDetail, error) {
	st, err := g.queueStream(ctx, queue)
	if err != nil {
		return QueueDetail{}, err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(mapping.SubjectPrefix+".>"))
	if err != nil {
		return QueueDetail{}, jsErr("queue info", err)
	}
	d := QueueDetail{QueueInfo: QueueInfo{Name: queue, Bytes: info.State.Bytes, Props: g.props.effective(queue)}}
	for subj, n := range info.State.Subjects {
		kind, _, _ := strings.Cut(strings.TrimPrefix(subj, mapping.SubjectPrefix+"."), ".")
		switch kind {
		case "q":
			d.Size += n
		case "s":
			d.Delayed += n
		case "d":
			d.DeadLetters += n
		case "a":
			d.Parts += n
		}
	}
	if c, err := st.Consumer(ctx, mapping.ConsumerName); err == nil {
		d.InFlight = uint64(c.CachedInfo().NumAckPending)
	}
	return d, nil
}
