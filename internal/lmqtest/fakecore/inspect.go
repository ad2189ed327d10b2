package fakecore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// Inspect is the fake inspection handle (gateway.Inspect): queue views,
// waiting messages by id, the deliveries in flight and dead letters.
type Inspect struct{ *state }

// QueueDetail is queue q's view (each message counts 10 bytes).
func (f *Inspect) QueueDetail(_ context.Context, q string) (gateway.QueueDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	qi, err := f.queue(q)
	if err != nil {
		return gateway.QueueDetail{}, err
	}
	if err := f.fail["QueueDetail"]; err != nil {
		return gateway.QueueDetail{}, err
	}
	qi.Bytes = 10 * qi.Size
	qi.DeadLetters = uint64(len(f.dead[q]))
	return qi, nil
}

// QueueStatuses is the view of every queue of scope, sorted by name.
func (f *Inspect) QueueStatuses(_ context.Context, scope gateway.Scope) ([]gateway.QueueStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []gateway.QueueStatus
	for _, name := range f.names() {
		if !scope.Allows(name) {
			continue
		}
		qi, err := f.queue(name)
		if errors.Is(err, gateway.ErrNotFound) {
			continue
		}
		out = append(out, gateway.QueueStatus{QueueInfo: gateway.QueueInfo{Name: name, Size: qi.Size}, Err: err})
	}
	return out, nil
}

// DeadLetterHead is queue q's oldest dead letter; nil when there is none.
func (f *Inspect) DeadLetterHead(_ context.Context, q string) (*gateway.DeadLetter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["DeadLetterHead"]; err != nil {
		return nil, err
	}
	if len(f.dead[q]) == 0 {
		return nil, nil
	}
	dl := f.dead[q][0]
	return &dl, nil
}

// RespawnDeadLetters pushes up to n of queue q's dead letters back.
func (f *Inspect) RespawnDeadLetters(_ context.Context, q string, n int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["RespawnDeadLetters"]; err != nil {
		return 0, err
	}
	n = min(n, len(f.dead[q]))
	for _, dl := range f.dead[q][:n] {
		f.push(q, dl.Message)
	}
	f.dead[q] = f.dead[q][n:]
	return n, nil
}

// DeleteDeadLetters forgets queue q's dead letters.
func (f *Inspect) DeleteDeadLetters(_ context.Context, q string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["DeleteDeadLetters"]; err != nil {
		return 0, err
	}
	n := uint64(len(f.dead[q]))
	delete(f.dead, q)
	return n, nil
}

// Messages lists up to n of queue q's waiting messages; a message's id
// (Seq) is its place in the queue, from 1 (the fake has no stream
// sequences).
func (f *Inspect) Messages(_ context.Context, q string, n int, withBody bool) ([]gateway.Peeked, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Messages"]; err != nil {
		return nil, err
	}
	if n < 1 || n > gateway.MaxPeek {
		return nil, fmt.Errorf("%w: n out of range", gateway.ErrInvalid)
	}
	msgs, ok := f.queues[q]
	if !ok {
		return nil, fmt.Errorf("queue %q: %w", q, gateway.ErrNotFound)
	}
	out := make([]gateway.Peeked, 0, min(n, len(msgs)))
	for i, m := range msgs[:min(n, len(msgs))] {
		p := gateway.Peeked{Seq: uint64(i + 1), ContentType: m.ContentType, Retry: -1, Size: int64(len(m.Body))}
		if withBody {
			p.Body = m.Body
		}
		out = append(out, p)
	}
	return out, nil
}

// DeleteMessage removes queue q's waiting message of id seq (its place in
// the queue, as Messages lists it).
func (f *Inspect) DeleteMessage(_ context.Context, q string, seq uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["DeleteMessage"]; err != nil {
		return err
	}
	if seq == 0 {
		return fmt.Errorf("%w: id 0", gateway.ErrInvalid)
	}
	msgs, ok := f.queues[q]
	if !ok || seq > uint64(len(msgs)) {
		return fmt.Errorf("queue %q message %d: %w", q, seq, gateway.ErrNotFound)
	}
	f.queues[q] = slices.Delete(msgs, int(seq-1), int(seq))
	return nil
}

// MoveMessage moves queue q's waiting message of id seq to the end of
// queue target (made when it does not exist).
func (f *Inspect) MoveMessage(_ context.Context, q string, seq uint64, target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["MoveMessage"]; err != nil {
		return err
	}
	if seq == 0 || target == "" || target == q {
		return fmt.Errorf("%w: id 0 or target %q", gateway.ErrInvalid, target)
	}
	msgs, ok := f.queues[q]
	if !ok || seq > uint64(len(msgs)) {
		return fmt.Errorf("queue %q message %d: %w", q, seq, gateway.ErrNotFound)
	}
	m := msgs[seq-1]
	f.queues[q] = slices.Delete(msgs, int(seq-1), int(seq))
	f.queues[target] = append(f.queues[target], m)
	return nil
}

// fakeTimeout is the time left the fake's deliveries show (Deliveries).
const fakeTimeout = 30 * time.Second

func (f *Inspect) infoLocked(id string, in inflight) gateway.DeliveryInfo {
	return gateway.DeliveryInfo{ID: id, Queue: in.queue, Gateway: "00000000",
		Client:      gateway.Client{Kind: gateway.ClientHTTP, Addr: "192.0.2.1:1234"},
		DeliveredAt: in.at, Deadline: in.at.Add(fakeTimeout), Receives: 1, RetryRemaining: 2}
}

// Deliveries lists queue q's deliveries not yet answered, oldest first.
func (f *Inspect) Deliveries(_ context.Context, q string) (gateway.DeliveryList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Deliveries"]; err != nil {
		return gateway.DeliveryList{}, err
	}
	if _, ok := f.queues[q]; !ok {
		return gateway.DeliveryList{}, fmt.Errorf("queue %q: %w", q, gateway.ErrNotFound)
	}
	var l gateway.DeliveryList
	for id, in := range f.inflight {
		if in.queue == q {
			l.Deliveries = append(l.Deliveries, f.infoLocked(id, in))
		}
	}
	slices.SortFunc(l.Deliveries, func(a, b gateway.DeliveryInfo) int { return strings.Compare(a.ID, b.ID) })
	return l, nil
}

// FindDelivery describes the delivery not yet answered whose id is id.
func (f *Inspect) FindDelivery(_ context.Context, id string) (gateway.DeliveryInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.inflight[id]
	if !ok {
		return gateway.DeliveryInfo{}, fmt.Errorf("delivery %s: %w", id, gateway.ErrNotFound)
	}
	return f.infoLocked(id, in), nil
}
