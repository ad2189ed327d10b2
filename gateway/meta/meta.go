// Package meta holds the queue metadata of front ends whose protocol says
// more than LMQ (SQS: times, tags, attributes): one JSON record per queue
// in the KV bucket LMQ_META (Records). The core (gateway.Queues) checks
// that the queue exists and hands the rest here; gateway.QueueMeta is Meta.
package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/lmq-gateway/lmq-gateway/internal/noise"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// Queue metadata lives in the KV bucket LMQ_META (mapping.MetaBucket), key
// q.<enc>, one JSON record per queue (metaRecord). Unlike properties it is
// not mirrored in memory: no message path reads it, only a front end's
// requests about the queue (SQS's GetQueueAttributes, ListQueueTags), so a
// read per request costs less than a follower per gateway. The bucket is
// made the first time a record is written; until then reads find none.

// Meta is what the core keeps about a queue beside its properties, for
// front ends whose protocol says more (SQS).
type Meta struct {
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
	MaxTags  = 64
	MaxAttrs = 64
	MaxLen   = 64 << 10 // bytes of the stored JSON
)

// metaConflicts bounds Update's retries when other writers change
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

// Config is what Records works with.
type Config struct {
	// Store opens the bucket when it exists.
	Store *store.Store
	// Create opens the bucket, making it the first time (the core's
	// openBucket, with its replicas).
	Create func(ctx context.Context, name, description string) (*kv.KV, error)
	// KeyGone reports whether the queue's registry key is gone (a delete
	// under way or done: registry.KeyGone).
	KeyGone func(ctx context.Context, queue string) bool
	Logger  *slog.Logger
	Noise   *noise.Limiter
}

// Records are the queues' metadata records. Create them with New; they
// are safe for concurrent use. None of their methods checks that the
// queue exists: that is the caller's.
type Records struct {
	cfg Config
	log *slog.Logger
	// mu guards bkt, the bucket once opened.
	mu  sync.Mutex
	bkt *kv.KV
}

// New returns the records of cfg's bucket; nothing is opened yet.
func New(cfg Config) *Records {
	return &Records{cfg: cfg, log: cfg.Logger}
}

// bucket is LMQ_META, opened (and made, when create is set) on first
// use; nil without an error when it does not exist and create is not set.
func (g *Records) bucket(ctx context.Context, create bool) (*kv.KV, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.bkt != nil {
		return g.bkt, nil
	}
	var bkt *kv.KV
	var err error
	if create {
		bkt, err = g.cfg.Create(ctx, mapping.MetaBucket, "lmq-gateway queue metadata (times, tags, front ends' attributes)")
	} else {
		bkt, err = g.cfg.Store.OpenKV(ctx, kv.Config{Bucket: mapping.MetaBucket, Create: kv.Existing})
		if errors.Is(err, kv.ErrBucketNotFound) {
			return nil, nil
		}
	}
	if err != nil {
		return nil, store.Classify("open "+mapping.MetaBucket, err)
	}
	g.bkt = bkt
	return bkt, nil
}

// Get returns the queue's metadata (all zero when it has none).
func (g *Records) Get(ctx context.Context, queue string) (Meta, error) {
	bkt, err := g.bucket(ctx, false)
	if bkt == nil || err != nil {
		return Meta{}, err
	}
	m, _, err := g.read(ctx, bkt, queue)
	return m, err
}

// Update changes the queue's metadata: fn gets the record as
// stored (a copy it may change; its maps are never nil), and what it leaves
// is written if the record did not change meanwhile, else read and fn run
// again (fn may thus run more than once: it must only change the record).
// Modified becomes now, and Created too when it is zero. A record beyond
// the bounds (MaxTags, MaxAttrs, MaxLen; empty keys, or
// keys and values that are not UTF-8) is not written: store.ErrInvalid.
// ErrNotFound when the queue's registry key went meanwhile (KeyGone): the
// record is removed again.
func (g *Records) Update(ctx context.Context, queue string, fn func(*Meta)) error {
	bkt, err := g.bucket(ctx, true)
	if err != nil {
		return err
	}
	key := metaKey(queue)
	for attempt := 0; ; attempt++ {
		m, rev, err := g.read(ctx, bkt, queue)
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
			return store.Classify("write queue metadata", err)
		}
	}
	// A DeleteQueue in between removed the record before this write: the
	// record goes again, or a queue made later under the name would inherit it.
	if g.cfg.KeyGone(ctx, queue) {
		if err := bkt.Purge(ctx, key); err != nil && !errors.Is(err, kv.ErrKeyNotFound) {
			g.log.Warn("could not remove the metadata of a queue deleted meanwhile", "queue", queue, "err", err)
		}
		return fmt.Errorf("queue %q: %w", queue, store.ErrNotFound)
	}
	return nil
}

// read reads the queue's record and its revision (0: none). What is
// stored is input: anyone with access to the bucket may write anything, so
// a record too large or not a record reads as none (logged), and is
// replaced by the next update.
func (g *Records) read(ctx context.Context, bkt *kv.KV, queue string) (Meta, uint64, error) {
	e, err := bkt.Get(ctx, metaKey(queue))
	if errors.Is(err, kv.ErrKeyNotFound) {
		return Meta{}, 0, nil
	}
	if err != nil {
		return Meta{}, 0, store.Classify("read queue metadata", err)
	}
	m, err := decodeMeta(e.Value)
	if err != nil {
		if n, ok := g.cfg.Noise.Allow("queue metadata unreadable"); ok {
			g.log.Warn("queue metadata unreadable; taken as none", "queue", queue, "err", err, "suppressed", n)
		}
		return Meta{}, e.Revision, nil
	}
	return m, e.Revision, nil
}

// decodeMeta reads a stored record back; unreadable times read as zero.
func decodeMeta(data []byte) (Meta, error) {
	if len(data) > MaxLen {
		return Meta{}, fmt.Errorf("%d bytes, more than %d", len(data), MaxLen)
	}
	var r metaRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return Meta{}, err
	}
	m := Meta{Tags: r.Tags, Attrs: r.Attrs}
	m.Created, _ = time.Parse(time.RFC3339Nano, r.Created)
	m.Modified, _ = time.Parse(time.RFC3339Nano, r.Modified)
	return m, nil
}

// encodeMeta renders a record to store, checking the bounds.
func encodeMeta(m Meta) ([]byte, error) {
	if len(m.Tags) > MaxTags {
		return nil, fmt.Errorf("%w: %d tags, at most %d", store.ErrInvalid, len(m.Tags), MaxTags)
	}
	if len(m.Attrs) > MaxAttrs {
		return nil, fmt.Errorf("%w: %d attributes, at most %d", store.ErrInvalid, len(m.Attrs), MaxAttrs)
	}
	for what, bkt := range map[string]map[string]string{"tag": m.Tags, "attribute": m.Attrs} {
		for k, v := range bkt {
			// JSON would turn bytes that are not UTF-8 into U+FFFD: what
			// comes back would not be what was given.
			if k == "" || !utf8.ValidString(k) || !utf8.ValidString(v) {
				return nil, fmt.Errorf("%w: %s %q: empty, or not UTF-8", store.ErrInvalid, what, k)
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
		return nil, fmt.Errorf("%w: queue metadata: %w", store.ErrInvalid, err)
	}
	if len(data) > MaxLen {
		return nil, fmt.Errorf("%w: queue metadata of %d bytes, at most %d", store.ErrInvalid, len(data), MaxLen)
	}
	return data, nil
}

// Created records that the queue was made now (the core's CreateQueue). A record
// already there (another gateway making the same queue at the same moment,
// whose front end may have added attributes since) is left as it is.
func (g *Records) Created(ctx context.Context, queue string) error {
	bkt, err := g.bucket(ctx, true)
	if err != nil {
		return err
	}
	now := time.Now()
	data, err := encodeMeta(Meta{Created: now, Modified: now})
	if err != nil {
		return err
	}
	if _, err := bkt.Create(ctx, metaKey(queue), data); err != nil && !errors.Is(err, kv.ErrKeyExists) {
		return store.Classify("write queue metadata", err)
	}
	return nil
}

// Drop removes a deleted queue's metadata; none is no error.
func (g *Records) Drop(ctx context.Context, queue string) error {
	bkt, err := g.bucket(ctx, false)
	if bkt == nil || err != nil {
		return err
	}
	if err := bkt.Purge(ctx, metaKey(queue)); err != nil && !errors.Is(err, kv.ErrKeyNotFound) {
		return store.Classify("delete queue metadata", err)
	}
	return nil
}
