package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// The one way messages go into queue streams. Every writer of the core
// (push, release, dead letters and their respawn, accumulation parts and
// compounds, migrated messages) encodes with Encode and stores with Publish
// (the store-health check, one retry policy, one classification of
// outcomes, the outcome recorded for readiness); atomic batches go through
// PublishBatch, which keeps the same check, classification and record.

// Publish stores m, a message of queue, and returns its stream sequence,
// re-creating the queue's shard stream once if it was deleted behind the
// gateways' backs. op names the store in errors. While
// the NATS server reports a store failure (a full disk) nothing is
// attempted; every outcome is recorded (Failure).
//
// Its errors are honest about the outcome: "no responders" means no stream
// took the message, so it is retried (a leader election, a reconnect) until
// the deadline and then answered ErrUnavailable; a PubAck that does not come
// back in time means the message may be stored, ErrUnknown. Retrying only
// after "no responders" cannot store a message twice.
func (s *Store) Publish(ctx context.Context, op, queue string, m *bus.Msg) (uint64, error) {
	if err := s.health.precheck(op); err != nil {
		return 0, err
	}
	seq, err := s.publishRetrying(ctx, op, queue, m)
	s.health.note(err)
	return seq, err
}

// publishRetrying is Publish after the store-health check.
func (s *Store) publishRetrying(ctx context.Context, op, queue string, m *bus.Msg) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	looked := false
	wait := 20 * time.Millisecond
	for {
		// publishOnce rather than js.PublishMsg (WithRetryAttempts(0)): the
		// same request and errors, without PublishMsg's options and
		// encoding/json's reflection, once per stored message (jsapi.ParsePubAck
		// reads the answer).
		ack, err := s.publishOnce(ctx, m)
		if err == nil {
			return ack.Seq, nil
		}
		if !errors.Is(err, jetstream.ErrNoStreamResponse) {
			return 0, Outcome(op, err)
		}
		// Either the stream is gone (an operator deleted it) or it has no
		// leader for the moment (an election in a cluster, or this
		// gateway's NATS node just went away). Only the first calls for
		// re-creating it; the lookup is short so that it never holds up a
		// push that a new leader could take.
		if !looked {
			looked = true
			sctx, scancel := context.WithTimeout(ctx, time.Second)
			_, serr := s.js.Stream(sctx, mapping.StreamName(queue))
			scancel()
			if errors.Is(serr, jetstream.ErrStreamNotFound) {
				if err := s.remakeShard(ctx, queue); err != nil {
					return 0, err
				}
				if ctx.Err() != nil {
					// The remake used up the time: nothing more is sent, and
					// what was sent found no stream (not stored), which a
					// publish with a spent ctx would turn into "unknown".
					return 0, notTakenInTime(ctx, op)
				}
				continue
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, notTakenInTime(ctx, op)
		case <-t.C:
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// notTakenInTime is publishRetrying's answer when ctx ends between tries:
// every try found no stream, so the message is not stored.
func notTakenInTime(ctx context.Context, op string) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	return fmt.Errorf("%s: %w: no stream leader took the message in time", op, ErrUnavailable)
}

// publishOnce sends m to the stream that takes its subject and waits for the
// PubAck, once: no retry after "no responders" (Publish has its own). ctx
// must have a deadline (Publish's storeTimeout), as PublishMsg would
// otherwise add its default one.
func (s *Store) publishOnce(ctx context.Context, m *bus.Msg) (jsapi.PubAck, error) {
	// As PublishMsg with an option: it gives the message an empty header.
	// Nothing goes differently on the wire; a caller that reuses m finds it
	// as before.
	if m.Header == nil {
		m.Header = bus.Headers{}
	}
	nm := natsMsg(m)
	resp, err := s.nc.RequestMsgWithContext(ctx, &nm)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return jsapi.PubAck{}, jetstream.ErrNoStreamResponse
		}
		return jsapi.PubAck{}, err
	}
	return jsapi.ParsePubAck(resp.Data)
}

// natsMsg is m as nats.go sends it (the fields are shared; the result does
// not escape nats.go's send calls, so it stays on the caller's stack).
func natsMsg(m *bus.Msg) nats.Msg {
	return nats.Msg{Subject: m.Subject, Reply: m.Reply, Header: nats.Header(m.Header), Data: m.Data}
}

// JetStream's atomic batch headers (ADR-50); nats.go names none of them.
const (
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
)

// PublishBatch stores msgs with JetStream's atomic batch publish: all or
// none, in order. It marks them as one batch, the last one committing it;
// msgs holds 1 to 1000 messages (JetStream's limit; gateway.MaxBatch).
// Its outcomes are Publish's:
// the commit's PubAck not coming back in time leaves the batch maybe stored
// (ErrUnknown, which a client must not take for "retry"); no stream
// responding, or a message before the commit failing to go out, means
// nothing is stored (JetStream drops an uncommitted batch).
func (s *Store) PublishBatch(ctx context.Context, msgs []*bus.Msg) error {
	if err := s.health.precheck("store batch"); err != nil {
		return err
	}
	id := uuid.NewString()
	for i, m := range msgs {
		m.Header.Set(hdrBatchID, id)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
	}
	msgs[len(msgs)-1].Header.Set(hdrBatchCommit, "1")
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	for _, m := range msgs[:len(msgs)-1] {
		nm := natsMsg(m)
		if err := s.nc.PublishMsg(&nm); err != nil {
			return Classify("store batch", err)
		}
	}
	_, err := s.publishOnce(ctx, msgs[len(msgs)-1])
	s.health.note(err)
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		return fmt.Errorf("store batch: %w: no stream took the batch", ErrUnavailable)
	}
	return Outcome("store batch", err)
}
