package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"
	"unicode/utf8"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// Queue metadata lives in the KV bucket LMQ_META (mapping.MetaBucket), key
// q.<enc>, one JSON record per queue (metaRecord). Unlike properties it is
// not mirrored in memory: no message path reads it, only a front end's
// requests about the queue (SQS's GetQueueAttributes, ListQueueTags), so a
// read per request costs less than a follower per gateway. The bucket is
// made the first time a record is written; until then reads find none.

// QueueMeta is what the core keeps about a queue beside its properties, for
// front ends whose protocol says more (SQS).
type QueueMeta struct {
	// Created and Modified are zero when unknown (a queue made before this
	// existed, or by LMQ without metadata).
	Created, Modified time.Time
	// Tags are the queue's tags (SQS's TagQueue); nil when none.
	Tags map[string]string
	// Attrs are attributes the core does not interpret (SQS: DelaySeconds,
	// ReceiveMessageWaitTimeSeconds, MaximumMessageSize, RedrivePolicy
	// text, FifoQueue, ...); nil when none.
	Attrs map[string]string
}

// Bounds of a metadata record, generous beside SQS's (50 tags, keys of at
// most 128 characters, values of 256; some twenty attributes): a record is
// read whole by every request about its queue.
const (
	MaxQueueTags    = 64
	MaxQueueAttrs   = 64
	MaxQueueMetaLen = 64 << 10 // bytes of the stored JSON
)

// metaConflicts bounds UpdateQueueMeta's retries when other writers change
// the same record at the same moment. Each conflict is another writer's
// success, so a writer fails that often only among as many at once (an SQS
// client tagging a queue from many threads): generous, since a failed
// update is a failed request.
const metaConflicts = 100

// metaRecord is the stored JSON: times in RFC 3339 (UTC), readable with
// `nats kv get`.
type metaRecord struct {
	Created  string            `json:"created,omitempty"`
	Modified string            `json:"modified,omitempty"`
	Tags     map[string]string `json:"tags,omitempty"`
	Attrs    map[string]string `json:"attrs,omitempty"`
}

func metaKey(queue string) string { return mapping.MetaKeyPrefix + mapping.EncodeName(queue) }

// metaBucket is LMQ_META, opened (and made, when create is set) on first
// use; nil without an error when it does not exist and create is not set.
func (g *Gateway) metaBucket(ctx context.Context, create bool) (*kv.KV, error) {
	g.metaMu.Lock()
	defer g.metaMu.Unlock()
	if g.metaKV != nil {
		return g.metaKV, nil
	}
	var bkt *kv.KV
	var err error
	if create {
		bkt, err = g.openBucket(ctx, mapping.MetaBucket, "lmq-gateway queue metadata (times, tags, front ends' attributes)")
	} else {
		bkt, err = g.store.OpenKV(ctx, kv.Config{Bucket: mapping.MetaBucket, Create: kv.Existing})
		if errors.Is(err, kv.ErrBucketNotFound) {
			return nil, nil
		}
	}
	if err != nil {
		return nil, jsErr("open "+mapping.MetaBucket, err)
	}
	g.metaKV = bkt
	return bkt, nil
}

// QueueMeta returns the queue's metadata (all zero when it has none);
// ErrNotFound when the queue does not exist.
func (g *Gateway) QueueMeta(ctx context.Context, queue string) (QueueMeta, error) {
	if err := g.existing(ctx, queue); err != nil {
		return QueueMeta{}, err
	}
	bkt, err := g.metaBucket(ctx, false)
	if bkt == nil || err != nil {
		return QueueMeta{}, err
	}
	m, _, err := g.readMeta(ctx, bkt, queue)
	return m, err
}

// UpdateQueueMeta changes the queue's metadata: fn gets the record as
// stored (a copy it may change; its maps are never nil), and what it leaves
// is written if the record did not change meanwhile, else read and fn run
// again (fn may thus run more than once: it must only change the record).
// Modified becomes now, and Created too when it is zero. A record beyond
// the bounds (MaxQueueTags, MaxQueueAttrs, MaxQueueMetaLen; empty keys, or
// keys and values that are not UTF-8) is not written: ErrInvalid.
// ErrNotFound when the queue does not exist.
func (g *Gateway) UpdateQueueMeta(ctx context.Context, queue string, fn func(*QueueMeta)) error {
	if err := g.existing(ctx, queue); err != nil {
		return err
	}
	bkt, err := g.metaBucket(ctx, true)
	if err != nil {
		return err
	}
	key := metaKey(queue)
	for attempt := 0; ; attempt++ {
		m, rev, err := g.readMeta(ctx, bkt, queue)
		if err != nil {
			return err
		}
		if m.Tags == nil {
			m.Tags = map[string]string{}
		}
		if m.Attrs == nil {
			m.Attrs = map[string]string{}
		}
		fn(&m)
		now := time.Now()
		m.Modified = now
		if m.Created.IsZero() {
			m.Created = now
		}
		data, err := encodeMeta(m)
		if err != nil {
			return err
		}
		if rev == 0 {
			_, err = bkt.Create(ctx, key, data)
		} else {
			_, err = bkt.Update(ctx, key, data, rev)
		}
		if err == nil {
			break
		}
		conflict := errors.Is(err, kv.ErrKeyExists) || errors.Is(err, kv.ErrRevisionMismatch)
		if !conflict || attempt >= metaConflicts {
			return jsErr("write queue metadata", err)
		}
	}
	// A DeleteQueue in between removed the record before this write: the
	// record goes again, or a queue made later under the name would inherit it.
	if g.reg.KeyGone(ctx, queue) {
		if err := bkt.Purge(ctx, key); err != nil && !errors.Is(err, kv.ErrKeyNotFound) {
			g.log.Warn("could not remove the metadata of a queue deleted meanwhile", "queue", queue, "err", err)
		}
		return fmt.Errorf("queue %q: %w", queue, ErrNotFound)
	}
	return nil
}

// existing checks the name and that the queue exists (ErrNotFound).
func (g *Gateway) existing(ctx context.Context, queue string) error {
	ok, err := g.QueueExists(ctx, queue)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("queue %q: %w", queue, ErrNotFound)
	}
	return nil
}

// QueueExists reports whether queue exists: from the registry's mirror, or
// when the mirror does not know it (yet) from the registry itself; no copy
// of the queue list, so a front end may ask it for every request.
func (g *Gateway) QueueExists(ctx context.Context, queue string) (bool, error) {
	if err := validName(queue); err != nil {
		return false, err
	}
	return g.reg.Exists(ctx, queue)
}

// readMeta reads the queue's record and its revision (0: none). What is
// stored is input: anyone with access to the bucket may write anything, so
// a record too large or not a record reads as none (logged), and is
// replaced by the next update.
func (g *Gateway) readMeta(ctx context.Context, bkt *kv.KV, queue string) (QueueMeta, uint64, error) {
	e, err := bkt.Get(ctx, metaKey(queue))
	if errors.Is(err, kv.ErrKeyNotFound) {
		return QueueMeta{}, 0, nil
	}
	if err != nil {
		return QueueMeta{}, 0, jsErr("read queue metadata", err)
	}
	m, err := decodeMeta(e.Value)
	if err != nil {
		if n, ok := g.noise.Allow("queue metadata unreadable"); ok {
			g.log.Warn("queue metadata unreadable; taken as none", "queue", queue, "err", err, "suppressed", n)
		}
		return QueueMeta{}, e.Revision, nil
	}
	return m, e.Revision, nil
}

// decodeMeta reads a stored record back; unreadable times read as zero.
func decodeMeta(data []byte) (QueueMeta, error) {
	if len(data) > MaxQueueMetaLen {
		return QueueMeta{}, fmt.Errorf("%d bytes, more than %d", len(data), MaxQueueMetaLen)
	}
	var r metaRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return QueueMeta{}, err
	}
	m := QueueMeta{Tags: r.Tags, Attrs: r.Attrs}
	m.Created, _ = time.Parse(time.RFC3339Nano, r.Created)
	m.Modified, _ = time.Parse(time.RFC3339Nano, r.Modified)
	return m, nil
}

// encodeMeta renders a record to store, checking the bounds.
func encodeMeta(m QueueMeta) ([]byte, error) {
	if len(m.Tags) > MaxQueueTags {
		return nil, fmt.Errorf("%w: %d tags, at most %d", ErrInvalid, len(m.Tags), MaxQueueTags)
	}
	if len(m.Attrs) > MaxQueueAttrs {
		return nil, fmt.Errorf("%w: %d attributes, at most %d", ErrInvalid, len(m.Attrs), MaxQueueAttrs)
	}
	for what, kv := range map[string]map[string]string{"tag": m.Tags, "attribute": m.Attrs} {
		for k, v := range kv {
			// JSON would turn bytes that are not UTF-8 into U+FFFD: what
			// comes back would not be what was given.
			if k == "" || !utf8.ValidString(k) || !utf8.ValidString(v) {
				return nil, fmt.Errorf("%w: %s %q: empty, or not UTF-8", ErrInvalid, what, k)
			}
		}
	}
	r := metaRecord{Tags: maps.Clone(m.Tags), Attrs: maps.Clone(m.Attrs)}
	if !m.Created.IsZero() {
		r.Created = m.Created.UTC().Format(time.RFC3339Nano)
	}
	if !m.Modified.IsZero() {
		r.Modified = m.Modified.UTC().Format(time.RFC3339Nano)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("%w: queue metadata: %w", ErrInvalid, err)
	}
	if len(data) > MaxQueueMetaLen {
		return nil, fmt.Errorf("%w: queue metadata of %d bytes, at most %d", ErrInvalid, len(data), MaxQueueMetaLen)
	}
	return data, nil
}

// createdMeta records that the queue was made now, by CreateQueue. A record
// already there (another gateway making the same queue at the same moment,
// whose front end may have added attributes since) is left as it is.
func (g *Gateway) createdMeta(ctx context.Context, queue string) error {
	bkt, err := g.metaBucket(ctx, true)
	if err != nil {
		return err
	}
	now := time.Now()
	data, err := encodeMeta(QueueMeta{Created: now, Modified: now})
	if err != nil {
		return err
	}
	if _, err := bkt.Create(ctx, metaKey(queue), data); err != nil && !errors.Is(err, kv.ErrKeyExists) {
		return jsErr("write queue metadata", err)
	}
	return nil
}

// dropMeta removes a deleted queue's metadata; none is no error.
func (g *Gateway) dropMeta(ctx context.Context, queue string) error {
	bkt, err := g.metaBucket(ctx, false)
	if bkt == nil || err != nil {
		return err
	}
	if err := bkt.Purge(ctx, metaKey(queue)); err != nil && !errors.Is(err, kv.ErrKeyNotFound) {
		return jsErr("delete queue metadata", err)
	}
	return nil
}
