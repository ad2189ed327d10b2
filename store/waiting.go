package store

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// One waiting message looked up and removed by its stream sequence (the id
// of GET /queues/{name}/messages, package gateway's DeleteMessage): what it
// is, whether the consumer that reads its subject already handed it out,
// and its removal. JetStream has no conditional delete, so "waiting" is
// decided from the consumer's delivered point just before the removal; the
// caller documents the window that leaves.

// Get returns the message at seq; nil (and no error) when the stream no
// longer holds it.
func (l *Log) Get(ctx context.Context, seq uint64) (*StoredMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	rm, err := l.st.GetMsg(ctx, seq)
	if err != nil && jsapi.MsgGone(err) {
		return nil, nil
	}
	if err != nil {
		return nil, Classify("read message", err)
	}
	return storedMsg(rm), nil
}

// Last returns the last message on subject; nil when it holds none. A
// group's head subject holds at most one message, so this is its head copy.
func (l *Log) Last(ctx context.Context, subject string) (*StoredMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	rm, err := l.st.GetLastMsgForSubject(ctx, subject)
	if err != nil && jsapi.MsgGone(err) {
		return nil, nil
	}
	if err != nil {
		return nil, Classify("read last message", err)
	}
	return storedMsg(rm), nil
}

// Delivered returns the stream sequence of the last message that the
// consumer of the queue's priority level p (0: the queue's own, which also
// reads its groups' head subjects) handed out: a message of its subjects at
// or below it that the stream still holds is in flight. 0 when the level
// has no consumer (never pulled from, or removed unused by JetStream: then
// nothing of it is in flight). The answer is the consumer leader's, asked
// now, not a cached one.
func (l *Log) Delivered(ctx context.Context, p int) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	name := mapping.ConsumerName(l.queue)
	if p > 0 {
		name = mapping.PriorityConsumerName(l.queue, p)
	}
	c, err := l.st.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, Classify("consumer info", err)
	}
	if ci := c.CachedInfo(); ci != nil {
		return ci.Delivered.Stream, nil
	}
	return 0, nil
}

// Remove removes the message at seq (not its Object Store body); removed
// is false when the stream no longer held it (another remover, an ack, a
// purge got there first).
func (l *Log) Remove(ctx context.Context, seq uint64) (removed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	err = l.st.DeleteMsg(ctx, seq)
	switch {
	case err == nil:
		return true, nil
	case jsapi.MsgGone(err):
		return false, nil
	}
	return false, Outcome("delete message", err)
}
