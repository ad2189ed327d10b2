package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// The one way messages go into queue streams and large bodies into the Object
// Store. Every writer (push, release, dead letters and their respawn,
// accumulation parts and compounds, migrated messages) encodes with
// encodeMessage, stores with publish (the store-health check, one retry
// policy, one classification of outcomes, the outcome recorded for
// readiness) and cleans up bodies that no stored message refers to with
// dropObject. Atomic batches go through commitBatch (batch.go), which keeps
// the same check, classification and record.

// storeTimeout bounds one store (publish and its PubAck) when the caller's
// context has no earlier deadline.
const storeTimeout = 5 * time.Second

// publish stores m and returns its stream sequence, re-creating the queue's
// shard stream once if it was deleted behind the gateways' backs. op names
// the store in errors. While the NATS server reports a store failure (a
// full disk) nothing is attempted (storeHealth.precheck); every outcome is
// recorded (storeHealth.note).
//
// Its errors are honest about the outcome: "no responders" means no stream
// took the message, so it is retried (a leader election, a reconnect) until
// the deadline and then answered ErrUnavailable; a PubAck that does not come
// back in time means the message may be stored, ErrUnknown. Retrying only
// after "no responders" cannot store a message twice.
func (g *Gateway) publish(ctx context.Context, op string, q *queueState, m *nats.Msg) (uint64, error) {
	if err := g.store.precheck(op); err != nil {
		return 0, err
	}
	seq, err := g.publishRetrying(ctx, op, q, m)
	g.store.note(err)
	return seq, err
}

// publishRetrying is publish after the store-health check.
func (g *Gateway) publishRetrying(ctx context.Context, op string, q *queueState, m *nats.Msg) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	looked := false
	wait := 20 * time.Millisecond
	for {
		// publishOnce rather than g.js.PublishMsg (WithRetryAttempts(0)):
		// the same request and errors, without PublishMsg's options and
		// encoding/json's reflection, once per stored message (puback.go).
		ack, err := g.publishOnce(ctx, m)
		if err == nil {
			return ack.seq, nil
		}
		if !errors.Is(err, jetstream.ErrNoStreamResponse) {
			return 0, outcomeErr(op, err)
		}
		// Either the shard stream is gone (an operator deleted it) or it has
		// no leader for the moment (an election in a cluster, or this
		// gateway's NATS node just went away). Only the first calls for
		// re-creating it; the lookup is short so that it never holds up a
		// push that a new leader could take.
		if !looked {
			looked = true
			sctx, scancel := context.WithTimeout(ctx, time.Second)
			_, serr := g.js.Stream(sctx, q.stream)
			scancel()
			if errors.Is(serr, jetstream.ErrStreamNotFound) {
				g.queues.shardLost(mapping.Shard(q.name))
				if _, err := g.queues.shard(ctx, mapping.Shard(q.name)); err != nil {
					return 0, err
				}
				continue
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if errors.Is(ctx.Err(), context.Canceled) {
				return 0, fmt.Errorf("%s: %w", op, ctx.Err())
			}
			return 0, fmt.Errorf("%s: %w: no stream leader took the message in time", op, ErrUnavailable)
		case <-t.C:
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}

// encodeMessage builds the NATS message storing msg on subject for queue: the
// body inline, or in the Object Store when it is too large for one NATS
// message; metadata in headers (mapping.Hdr*).
func (g *Gateway) encodeMessage(ctx context.Context, queue, subject string, msg Message, retry int) (*nats.Msg, error) {
	m := nats.NewMsg(subject)
	if msg.ContentType != "" {
		m.Header.Set(mapping.HdrContentType, msg.ContentType)
	}
	m.Header.Set(mapping.HdrPushedAt, strconv.FormatInt(time.Now().UnixNano(), 10))
	m.Header.Set(mapping.HdrRetry, strconv.Itoa(retry))
	for _, h := range msg.Kept {
		m.Header.Add(mapping.HdrKeepPrefix+h.Name, h.Value)
	}
	if msg.stored != nil {
		m.Header.Set(mapping.HdrObject, msg.stored.name)
		return m, nil
	}
	if int64(len(msg.Body))+headerRoom <= g.nc.MaxPayload() {
		m.Data = msg.Body
		return m, nil
	}
	obj, err := g.objectStore(ctx)
	if err != nil {
		return nil, jsErr("store large message", err)
	}
	name := mapping.EncodeName(queue) + "/" + uuid.NewString()
	if _, err := obj.PutBytes(ctx, name, msg.Body); err != nil {
		return nil, jsErr("store large message", err)
	}
	m.Header.Set(mapping.HdrObject, name)
	return m, nil
}

// decodeMessage reads back a message stored by encodeMessage (or published by
// a plain NATS program, whose body is the content).
func (g *Gateway) decodeMessage(ctx context.Context, m *nats.Msg) (Message, error) {
	msg := Message{ContentType: m.Header.Get(mapping.HdrContentType), Body: m.Data}
	for k, vs := range m.Header {
		name, ok := cutPrefixFold(k, mapping.HdrKeepPrefix)
		if !ok {
			continue
		}
		for _, v := range vs {
			msg.Kept = append(msg.Kept, Header{Name: lowerHeaderName(name), Value: v})
		}
	}
	if ref := m.Header.Get(mapping.HdrObject); ref != "" {
		obj, err := g.objectStore(ctx)
		if err != nil {
			return Message{}, jsErr("load large message", err)
		}
		if msg.Body, err = obj.GetBytes(ctx, ref); err != nil {
			return Message{}, jsErr("load large message", err)
		}
	}
	return msg, nil
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return "", false
	}
	return s[len(prefix):], true
}

// dropObject deletes the Object Store body a message refers to, if any: for
// a message certainly not stored, or removed for good.
func (g *Gateway) dropObject(ctx context.Context, m *nats.Msg) {
	if ref := m.Header.Get(mapping.HdrObject); ref != "" {
		g.deleteObject(ctx, ref)
	}
}

// deleteObject removes an Object Store body that no message refers to (one
// already gone is fine). A clean-up is worth finishing when the request that
// asked for it has ended, so it runs on its own deadline.
func (g *Gateway) deleteObject(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	obj, err := g.objectStore(ctx)
	if err == nil {
		err = obj.Delete(ctx, name)
	}
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		g.log.Warn("could not delete large-message body", "object", name, "err", err)
	}
}

// deleteQueueObjects removes the large bodies of a deleted queue.
func (g *Gateway) deleteQueueObjects(ctx context.Context, queue string) {
	g.objMu.Lock()
	obj := g.obj
	g.objMu.Unlock()
	if obj == nil {
		if _, err := g.js.ObjectStore(ctx, mapping.ObjectBucket); err != nil {
			return // no large bodies were ever stored
		}
		var err error
		if obj, err = g.objectStore(ctx); err != nil {
			return
		}
	}
	list, err := obj.List(ctx)
	if err != nil {
		return
	}
	// Bodies stored before the upgrade from the one-stream-per-queue layout
	// keep that layout's name (hashed for long queue names).
	prefix, legacy := mapping.EncodeName(queue)+"/", mapping.LegacyEncodeName(queue)+"/"
	for _, info := range list {
		if strings.HasPrefix(info.Name, prefix) || strings.HasPrefix(info.Name, legacy) {
			_ = obj.Delete(ctx, info.Name)
		}
	}
}
