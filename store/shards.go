package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// The shard streams LMQS_00..63 (package gateway's doc, "Layout"): made on
// first use, adopted at start, brought up to date when an older version
// made them, made again when an operator deleted one.

// shardSlot caches a shard stream's handle once it is known to exist.
type shardSlot struct {
	mu sync.Mutex
	sh *Shard
}

// cachedShard is shard k's handle if this store has made or seen its stream.
func (s *Store) cachedShard(k int) *Shard {
	sl := &s.shards[k]
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.sh
}

// Shard returns a handle on shard k's stream, creating the stream on first
// use (or bringing one made by an older version up to date).
func (h Shards) Shard(ctx context.Context, k int) (*Shard, error) {
	s := h.s
	if sh := s.cachedShard(k); sh != nil {
		return sh, nil
	}
	s.shardMu.Lock()
	defer s.shardMu.Unlock()
	if sh := s.cachedShard(k); sh != nil {
		return sh, nil
	}
	want := shardConfig(k, s.cfg.Replicas)
	st, err := s.js.CreateStream(ctx, want)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		st, err = s.upgradeShard(ctx, want)
	}
	if err != nil {
		return nil, Classify("create queue stream", err)
	}
	sh := &Shard{k: k, st: st}
	sl := &s.shards[k]
	sl.mu.Lock()
	sl.sh = sh
	sl.mu.Unlock()
	return sh, nil
}

// QueueShard is the handle on queue's shard stream (Shard).
func (h Shards) QueueShard(ctx context.Context, queue string) (*Shard, error) {
	s := h.s
	return s.Shards().Shard(ctx, mapping.Shard(queue))
}

// queueStream is queue's shard stream, for this package's own requests.
func (s *Store) queueStream(ctx context.Context, queue string) (jetstream.Stream, error) {
	sh, err := s.Shards().QueueShard(ctx, queue)
	if err != nil {
		return nil, err
	}
	return sh.st, nil
}

// LookupShard returns the handle on shard k's stream if the stream exists
// (nil if not), without creating it: another gateway may have made it
// since this one started.
func (h Shards) LookupShard(ctx context.Context, k int) (*Shard, error) {
	s := h.s
	if sh := s.cachedShard(k); sh != nil {
		return sh, nil
	}
	_, err := s.js.Stream(ctx, mapping.ShardStream(k))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, Classify("queue stream", err)
	}
	return s.Shards().Shard(ctx, k)
}

// shardLost forgets shard k's stream after JetStream said it is gone (an
// operator deleted it): the next use creates it again.
func (s *Store) shardLost(k int) {
	sl := &s.shards[k]
	sl.mu.Lock()
	sl.sh = nil
	sl.mu.Unlock()
}

// remakeShard creates queue's shard stream again after JetStream said it
// is gone (Publish).
func (s *Store) remakeShard(ctx context.Context, queue string) error {
	k := mapping.Shard(queue)
	s.shardLost(k)
	_, err := s.Shards().Shard(ctx, k)
	return err
}

// StoredQueues returns the names of the queues holding messages in the
// shard streams that exist, bringing each shard up to date on the way. The
// core registers those it does not know (a message is never left where no
// client can reach it).
func (h Shards) StoredQueues(ctx context.Context) ([]string, error) {
	s := h.s
	names := s.js.StreamNames(ctx)
	var shards []int
	for n := range names.Name() {
		if k, ok := mapping.ShardFromStream(n); ok {
			shards = append(shards, k)
		}
	}
	if err := names.Err(); err != nil {
		return nil, fmt.Errorf("list queue streams: %w", err)
	}
	var queues []string
	for _, k := range shards {
		sh, err := s.Shards().Shard(ctx, k)
		if err != nil {
			return nil, err
		}
		info, err := sh.st.Info(ctx, jetstream.WithSubjectFilter(mapping.SubjectPrefix+".>"))
		if err != nil {
			return nil, Classify("list queues", err)
		}
		for subj := range info.State.Subjects {
			_, enc, ok := mapping.ParseSubject(subj)
			if !ok {
				continue
			}
			if name, ok := mapping.DecodeName(enc); ok {
				queues = append(queues, name)
			}
		}
	}
	return queues, nil
}

// shardConfig is shard k's stream. The features beyond LMQ need stream
// settings that JetStream does not let us turn off again (per-message TTL,
// schedules for delays, atomic batches); they cost nothing while unused, so
// every shard gets them from the start.
//
// Block churn (issue 19), measured and left as it is: JetStream's file
// store deletes a message block when its last message goes
// (fileStore.removeMsgFromBlock → removeMsgBlock, server/filestore.go in
// nats-server 2.15); when that is the block being written it first rolls to
// a new one (newMsgBlockForWrite: a new .blk file, hash key, write cache,
// flush goroutine), writes a tombstone there and unlinks the old file. A
// queue whose consumers keep up is emptied by nearly every ack, so at 2,000
// msg/s the store made and removed a block file every ~2 messages. No
// setting avoids it: the block size only bounds a full block, S2 compression
// adds a recompression of each rolled block (raw test: 300 against 197
// µs/msg), SyncInterval/SyncAlways only act on flushing. A message nobody
// consumes in the block being written avoids it (an ack then only appends a
// tombstone). Two such keepers were built and measured: republished every
// second by a JetStream schedule, and written (rolled up) by a gateway at
// most once a second after pushes into the shard. In-process they cut CPU
// per pull+ack by 25-50%, but through the binary at a steady 2,000 msg/s
// (lmq-bench e2e) CPU per message did not move (519-526 against 527-537
// µs) and p99 latency rose from 11-14 ms to 25-47 ms: each rollup removes
// the previous keeper from an older block, and blocks emptied while a keeper
// pins the first sequence stay on disk, tombstones and all, until the
// store's periodic sync compacts them (numPriorTombsLocked; every 2 min).
// Neither is used (docs/benchmarks-history.md "CPU per message", issue 19 closing note).
func shardConfig(k, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:               mapping.ShardStream(k),
		Description:        fmt.Sprintf("lmq queues, shard %d of %d", k, mapping.ShardCount),
		Subjects:           mapping.ShardSubjects(k),
		Retention:          jetstream.WorkQueuePolicy,
		Storage:            jetstream.FileStorage,
		Replicas:           replicas,
		AllowMsgTTL:        true,
		AllowMsgSchedules:  true,
		AllowAtomicPublish: true,
		AllowRollup:        true, // implied by schedules; set so configs compare equal
		Duplicates:         DuplicateWindow,
	}
}

// DuplicateWindow is the shard streams' duplicate window: how long a
// Nats-Msg-Id (the core's idempotency keys) is remembered. SQS's
// deduplication interval, 5 minutes, instead of JetStream's default 2, so
// that SQS's MessageDeduplicationId can use the same keys. The window costs
// memory only for the ids pushed within it.
const DuplicateWindow = 5 * time.Minute

// upgradeShard brings an existing shard stream (made by an older version, or
// edited) up to the settings this version needs, keeping its replicas.
func (s *Store) upgradeShard(ctx context.Context, want jetstream.StreamConfig) (jetstream.Stream, error) {
	st, err := s.js.Stream(ctx, want.Name)
	if err != nil {
		return nil, err
	}
	have := st.CachedInfo().Config
	// A longer duplicate window (an operator's) is kept: it still remembers
	// every key for DuplicateWindow. 0 is JetStream's default, 2 minutes.
	if have.AllowMsgTTL && have.AllowMsgSchedules && have.AllowAtomicPublish && subjectsCover(have.Subjects, want.Subjects) &&
		have.Duplicates >= want.Duplicates {
		return st, nil
	}
	have.Subjects = want.Subjects
	have.AllowMsgTTL, have.AllowMsgSchedules, have.AllowAtomicPublish, have.AllowRollup = true, true, true, true
	if have.Duplicates < want.Duplicates {
		have.Duplicates = want.Duplicates
	}
	have.DenyPurge = false
	if _, err := s.js.UpdateStream(ctx, have); err != nil {
		return nil, fmt.Errorf("upgrade stream %s: %w", want.Name, err)
	}
	return s.js.Stream(ctx, want.Name)
}

func subjectsCover(have, want []string) bool {
	set := make(map[string]bool, len(have))
	for _, s := range have {
		set[s] = true
	}
	for _, s := range want {
		if !set[s] {
			return false
		}
	}
	return true
}
