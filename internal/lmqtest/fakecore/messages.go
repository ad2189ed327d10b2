package fakecore

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// Messages is the fake messages handle (gateway.Messages): push, pull,
// reply, visibility, and deliveries given back.
type Messages struct{ *state }

// Push stores msg in queue q.
func (f *Messages) Push(ctx context.Context, q string, msg gateway.Message) (gateway.AccumState, error) {
	return f.PushWith(ctx, q, msg, gateway.PushOptions{})
}

// PushWith is Push with options, which it records (Core.LastOptions).
func (f *Messages) PushWith(_ context.Context, q string, msg gateway.Message, opts gateway.PushOptions) (gateway.AccumState, error) {
	if err := validName(q); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Push"]; err != nil {
		return "", err
	}
	f.lastOpts = opts
	return f.push(q, msg), nil
}

// PushSeq is PushWith answered with the message's sequence: the number of
// messages PushSeq stored so far, counting this one (the fake has no
// streams); Core.Sent lists them.
func (f *Messages) PushSeq(_ context.Context, q string, msg gateway.Message, opts gateway.PushOptions) (uint64, error) {
	if err := validName(q); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Push"]; err != nil {
		return 0, err
	}
	f.lastOpts = opts
	f.push(q, msg)
	f.sent = append(f.sent, msg)
	return uint64(len(f.sent)), nil
}

// PushStream is Push of a body read from body.
func (f *Messages) PushStream(_ context.Context, q string, msg gateway.Message, body io.Reader, opts gateway.PushOptions) (gateway.AccumState, error) {
	// Read as the core does: the handler's limit shows as the reader's error.
	b, err := io.ReadAll(body)
	if err != nil {
		return "", fmt.Errorf("reading body: %w", err)
	}
	msg.Body = b
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["PushStream"]; err != nil {
		return "", err
	}
	f.lastOpts = opts
	return f.push(q, msg), nil
}

// PushAll pushes msg to every queue of scope whose name re matches.
func (f *Messages) PushAll(_ context.Context, re *regexp.Regexp, msg gateway.Message, scope gateway.Scope) (map[string]gateway.AccumState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["PushAll"]; err != nil {
		return nil, err
	}
	out := make(map[string]gateway.AccumState)
	for q := range f.queues {
		if re.MatchString(q) && scope.Allows(q) {
			out[q] = f.push(q, msg)
		}
	}
	return out, nil
}

// PushBatch stores msgs in queue q.
func (f *Messages) PushBatch(_ context.Context, q string, msgs []gateway.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["PushBatch"]; err != nil {
		return err
	}
	f.batches = append(f.batches, msgs)
	for _, m := range msgs {
		f.push(q, m)
	}
	return nil
}

// Pull hands out a message of queue q (creating it), waiting up to wait
// (negative: until ctx ends) for one.
func (f *Messages) Pull(ctx context.Context, q string, wait time.Duration) (*gateway.Delivery, error) {
	if err := validName(q); err != nil {
		return nil, err
	}
	return f.pull(ctx, "Pull", func(s string) bool { return s == q }, q, wait)
}

// PullAny is Pull over the queues of scope whose name re matches.
func (f *Messages) PullAny(ctx context.Context, re *regexp.Regexp, wait time.Duration, scope gateway.Scope) (*gateway.Delivery, error) {
	return f.pull(ctx, "PullAny", func(q string) bool { return re.MatchString(q) && scope.Allows(q) }, "", wait)
}

// Abandon puts a delivery's messages back at the head of its queue.
func (f *Messages) Abandon(_ context.Context, d *gateway.Delivery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.abandoned = append(f.abandoned, d.ID)
	if in, ok := f.inflight[d.ID]; ok {
		delete(f.inflight, d.ID)
		f.queues[in.queue] = append(slices.Clone(in.msgs), f.queues[in.queue]...)
	}
}

// Reply acks (forgets), nacks (requeues) or extends a delivery.
func (f *Messages) Reply(_ context.Context, q, id string, kind gateway.ReplyKind) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Reply"]; err != nil {
		return err
	}
	return f.reply(q, id, kind)
}

// SetVisibility requeues a delivery (d 0) or extends it (any other d; the
// fake keeps no deadlines).
func (f *Messages) SetVisibility(_ context.Context, q, id string, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["SetVisibility"]; err != nil {
		return err
	}
	kind := gateway.Ext
	if d == 0 {
		kind = gateway.Nack
	}
	return f.reply(q, id, kind)
}
