package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Stored messages read back and removed by stream sequence, below the
// level of deliveries: a released delivery's body, a push taken back, and
// the accumulator's and migrate's bookkeeping (Log).

// ReadBack returns the body of queue's message at stream sequence seq (a
// delivery in flight keeps only its headers in memory); an error for which
// NotStored holds when the stream no longer has it.
func (s *Store) ReadBack(ctx context.Context, queue string, seq uint64) ([]byte, error) {
	st, err := s.queueStream(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", mapping.StreamName(queue), err)
	}
	m, err := st.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("read message %d back: %w", seq, err)
	}
	return m.Data, nil
}

// TakeBack removes queue's message at seq, as far as it can: the caller
// answers as if it never was stored either way.
func (s *Store) TakeBack(ctx context.Context, queue string, seq uint64) {
	if st, err := s.queueStream(ctx, queue); err == nil {
		_ = st.DeleteMsg(ctx, seq)
	}
}

// Log reads and trims one queue's messages in its shard stream by
// sequence. Open it with OpenLog.
type Log struct {
	queue string
	st    jetstream.Stream
}

// OpenLog opens queue's shard stream with a fresh look (not the cached
// handle): LastSeq must be now's.
func (s *Store) OpenLog(ctx context.Context, queue string) (*Log, error) {
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	st, err := s.js.Stream(ctx, mapping.StreamName(queue))
	if err != nil {
		return nil, Classify("queue", err)
	}
	return &Log{queue: queue, st: st}, nil
}

// LastSeq is the stream's last sequence when OpenLog opened it (its
// leader's answer).
func (l *Log) LastSeq() uint64 { return l.st.CachedInfo().State.LastSeq }

// Next is the first message on subject at or after sequence from; nil when
// there is none.
func (l *Log) Next(ctx context.Context, subject string, from uint64) (*StoredMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	rm, err := l.st.GetMsg(ctx, from, jetstream.WithGetMsgSubject(subject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, Classify("read queue stream", err)
	}
	return storedMsg(rm), nil
}

// Has reports whether the stream still holds sequence seq.
func (l *Log) Has(ctx context.Context, seq uint64) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	_, err := l.st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, Classify("look up message", err)
	}
	return true, nil
}

// Delete removes the message at seq (not its Object Store body); one
// already gone is fine.
func (l *Log) Delete(ctx context.Context, seq uint64) error {
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	err := l.st.DeleteMsg(ctx, seq)
	if err == nil || jsapi.MsgGone(err) {
		return nil
	}
	return Classify("delete message", err)
}

// PurgeParts removes every accumulation part up to and including sequence
// through, in one request.
func (l *Log) PurgeParts(ctx context.Context, through uint64) error {
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	err := l.st.Purge(ctx, jetstream.WithPurgeSubject(mapping.PartSubject(l.queue)), jetstream.WithPurgeSequence(through+1))
	if err != nil {
		return Classify("remove parts", err)
	}
	return nil
}
