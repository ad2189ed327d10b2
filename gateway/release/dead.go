package release

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// Dead letters (beyond LMQ) live in the queue's own stream on a subject the
// queue's consumer does not see: mapping.DeadSubject (lmq.d.<enc>).

// bury moves a retry-exhausted message to the queue's dead letters, with its
// history: the deliveries it had (Lmq-Delivered) and when it died.
func (g *Releaser) bury(r *dispatch.Raw) error {
	ctx, cancel := context.WithTimeout(context.Background(), g.opTime)
	defer cancel()
	cp := bus.NewMsg(mapping.DeadSubject(r.Queue().Name()))
	CopyOwnHeaders(cp, r.Msg.Header)
	if r.Level > 0 {
		// Kept for a respawn (one a NATS program published lacks it).
		cp.Header.Set(mapping.HdrPriority, strconv.Itoa(r.Level))
	}
	cp.Header.Set(mapping.HdrDelivered, strconv.Itoa(r.Used()))
	cp.Header.Set(mapping.HdrDeadAt, time.Now().UTC().Format(time.RFC3339Nano))
	cp.Header.Del(mapping.HdrGroupSeq) // (its group goes on without it)
	var err error
	if cp.Data, err = g.Body(ctx, r); err != nil {
		return err
	}
	if _, err := g.store.Publish(ctx, "store dead letter", r.Queue().Name(), cp); err != nil {
		return err
	}
	advanced, err := g.groups.End(ctx, r)
	if err != nil {
		return fmt.Errorf("remove dead message: %w", err)
	}
	if err := g.store.Ack(ctx, &r.Msg); err != nil {
		return fmt.Errorf("remove dead message: %w", err)
	}
	if !advanced {
		g.groups.Next(r)
	}
	return nil
}

// Respawn moves up to n of the oldest dead letters of q, whose shard is sh,
// back into the queue with fresh retries; it returns how many moved.
func (g *Releaser) Respawn(ctx context.Context, sh *store.Shard, q *dispatch.Queue, n int) (int, error) {
	queue := q.Name()
	moved, levels := 0, uint16(0)
	for seq := uint64(1); moved < n; {
		raw, err := sh.Next(ctx, mapping.DeadSubject(queue), seq)
		if err != nil {
			return moved, fmt.Errorf("read dead letter: %w", err) // classified by the store
		}
		if raw == nil {
			break
		}
		// Back to its own priority (the Lmq-Priority header it kept).
		p := store.MessagePriority("", raw.Header)
		levels |= 1 << p
		m := bus.NewMsg(mapping.PrioritySubject(queue, p))
		CopyOwnHeaders(m, raw.Header)
		m.Header.Del(mapping.HdrDelivered)
		m.Header.Del(mapping.HdrDeadAt)
		m.Data = raw.Data
		// Store the live copy first: a crash in between leaves a duplicate
		// dead letter, never a lost message.
		if _, err := g.store.Publish(ctx, "respawn dead letter", queue, m); err != nil {
			return moved, err
		}
		if err := sh.Delete(ctx, raw.Seq); err != nil {
			return moved, fmt.Errorf("remove dead letter: %w", err)
		}
		moved++
		seq = raw.Seq + 1
	}
	for p := mapping.MaxPriority; p >= 0; p-- {
		if levels&(1<<p) != 0 {
			g.disp.NotifyLevel(queue, p)
		}
	}
	return moved, nil
}

// DeleteDead drops every dead letter of queue, whose shard is sh; it
// returns how many.
func (g *Releaser) DeleteDead(ctx context.Context, sh *store.Shard, queue string) (uint64, error) {
	// Large bodies first: after the purge nothing refers to them any more.
	for seq := uint64(1); ; {
		raw, err := sh.Next(ctx, mapping.DeadSubject(queue), seq)
		if err != nil || raw == nil {
			break
		}
		g.store.Bodies().DropBody(ctx, &bus.Msg{Header: raw.Header})
		seq = raw.Seq + 1
	}
	n, err := sh.PurgeSubject(ctx, mapping.DeadSubject(queue))
	if err != nil {
		return 0, fmt.Errorf("delete dead letters: %w", err)
	}
	return n, nil
}
