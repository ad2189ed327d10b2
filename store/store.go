// Package store is the one seam between the gateway's core and JetStream
// for queue data: every message the core stores goes through a *Store, and
// so does every large body in the Object Store and every read of a stored
// message's content. It owns every JetStream stream and consumer of queue
// data: the shard streams LMQS_00..63 (made on first use, brought up to
// date, made again when deleted: shards.go) and the core's handles on them
// (shard.go: a *Shard answers per-subject counts, reads by subject and
// sequence, consumers' positions, removals by sequence or subject, in the
// seam's types: StoredMsg, ShardInfo, ConsumerState, bus.Headers), the
// queues' consumers and their storage (consumers.go), the consumer pull
// wire (pullwire.go) and the shared look at which queues hold messages
// (scan.go), reads and removals of stored messages by sequence (log.go),
// and purging a queue's waiting messages and the large bodies only they
// used (purge.go). It owns the store-health check (a full disk fails a
// store at once), the publish and its hand-read PubAck, the one retry
// policy (only after "no responders", which cannot store twice), atomic
// batches, the large-body writer with flow control, and the classification
// of every outcome as stored, not stored (ErrUnavailable) or unknown
// (ErrUnknown).
//
// Two subpackages complete the seam. Every KV bucket of the gateway is a
// *kv.KV (store/kv; Store.OpenKV opens one on the store's JetStream), so
// that the properties, the queue registry, queue metadata, access tokens,
// accumulation windows and the upgrade lock use no JetStream type. The
// core's core-NATS traffic is store/bus: a *bus.Bus is the connection as
// the core and the daemon hold it (publish, request, subscribe, flush,
// reconnect hook), and bus.Msg every message the core builds or receives,
// the ones this package stores and pulls included. So no nats.go type
// crosses this package's API outside New, for the seam's own packages: the
// core and the daemon open a Store with Open(bus, cfg), and buckets with
// Store.OpenKV or bus.Bus.OpenKV.
//
// Why one seam: the same rules used to be repeated (and missed) at each
// writer, and one writer answered a timed-out batch "retry" where the
// others said "maybe stored"; here a change to how queue data is stored, or
// to what an outcome means, is a change in one package. Package gateway
// decides what to store and when (delivery rules, retries, priorities);
// this package decides how, and what came of it. It knows the message
// layout of package mapping but nothing of queues' state: the core asks it
// for a queue's shard or consumer, and keeps its dispatchers, waiters and
// deliveries itself. Which subjects hold a queue's waiting messages is
// package mapping's one answer (mapping/waiting.go), used here by the scans
// and the consumers' filters.
package store

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// Config configures a Store.
type Config struct {
	// Replicas of the buckets the store creates (large bodies, health
	// probes): the queues' replicas.
	Replicas int
	// Health, when set, reports the NATS server's standing store failure
	// (a full disk), nil when it has none. Meanwhile stores fail at once
	// with ErrUnavailable.
	Health func() error
	// FileConsumers keeps the state of the queues' consumers in files; by
	// default it is kept in memory (package gateway's doc, "Consumer
	// storage"). Consumers that exist already keep the storage they have.
	FileConsumers bool
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
	// Domain or APIPrefix (at most one) name the JetStream that Open
	// works on: a domain's, or one imported under that API prefix; neither:
	// the account's own. New ignores them (its JetStream is given).
	Domain    string
	APIPrefix string
}

// Store writes queue data to JetStream and reads it back. Create it with
// New; it is safe for concurrent use.
type Store struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg Config
	log *slog.Logger

	health health

	// objMu guards obj, the large-body bucket once opened.
	objMu sync.Mutex
	obj   jetstream.ObjectStore

	// shardMu serializes creating shard streams; shards caches their
	// handles (shards.go).
	shardMu sync.Mutex
	shards  [mapping.ShardCount]shardSlot
	// scan is the last look at the shards' subject counts (scan.go).
	scan scanCache
}

// storeTimeout bounds one store (publish and its PubAck) when the caller's
// context has no earlier deadline.
const storeTimeout = 5 * time.Second

// cleanupTimeout bounds a clean-up that runs on its own deadline (removing
// a body nothing refers to any more).
const cleanupTimeout = 10 * time.Second

// New returns a Store writing over nc to the JetStream js.
func New(nc *nats.Conn, js jetstream.JetStream, cfg Config) *Store {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Store{nc: nc, js: js, cfg: cfg, log: cfg.Logger}
	s.health.check, s.health.log = cfg.Health, cfg.Logger
	return s
}

// Open returns a Store on b's JetStream: the account's own, a domain's
// (cfg.Domain) or one imported under cfg.APIPrefix.
func Open(b *bus.Bus, cfg Config) (*Store, error) {
	js, err := jsapi.New(b.NATS(), cfg.Domain, cfg.APIPrefix)
	if err != nil {
		return nil, err
	}
	return New(b.NATS(), js, cfg), nil
}

// OpenKV opens a bucket on the store's JetStream (kv.Open).
func (s *Store) OpenKV(ctx context.Context, cfg kv.Config) (*kv.KV, error) {
	return kv.Open(ctx, s.js, cfg)
}
