package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// A queue's durable pull consumers (one for the queue, one per priority
// level pulled from): their config, their storage (Config.FileConsumers),
// and their AckWait, which the core keeps a margin above the queue's
// timeout (package gateway's doc, "Deliveries" and "Consumer storage").

// Backstop is the consumer AckWait for a queue timeout: JetStream redelivers
// on its own only when the gateway that held the delivery is gone, so it must
// stay clear of the gateway's own timer.
func Backstop(timeout time.Duration) time.Duration {
	margin := timeout / 10
	if margin < 5*time.Second {
		margin = 5 * time.Second
	}
	return timeout + margin
}

// Limits are the settings of a queue's consumers that follow its
// properties.
type Limits struct {
	// AckWait: Backstop of the queue's timeout (or more).
	AckWait time.Duration
	// MaxInflight is the max_inflight property (0: no limit): the
	// consumer's MaxAckPending, which JetStream enforces across every
	// gateway pulling from it.
	MaxInflight int
	// Heads: the queue's own consumer also reads its ordered groups' head
	// subjects (mapping.HeadWildcard); see "Group heads" below.
	Heads bool
}

// Group heads: the queue's own consumer reads only the queue's subject
// until the queue has ordered groups, and the queue's subject plus its
// groups' head subjects from then on. JetStream serves a consumer with one
// literal filter from the subject's index (fileStore.LoadNextMsg), and one
// with two filters by intersecting a sublist with the block's and the
// stream's subject trees (LoadNextMsgMulti, NumPendingMulti); in a shard
// holding ~156 queues' consumers (10,000 queues in use) the second cost
// about a fifth of the CPU of a pull+ack, and its sublist ~2.6 KB of heap
// per consumer.
//
// A consumer without the head subjects never delivers a head, and once it
// has looked past a head's sequence it never goes back to it (adding a
// filter does not rewind a consumer). So heads are only ever stored while
// the consumer reads them:
//
//   - a consumer is made without them only by a create that fails when
//     one exists with another config (MakeConsumer); every other write
//     (an update, a create that met another config) gives it the head
//     subjects, so none ever loses them;
//   - a gateway makes sure of them (EnsureHeads, which also makes the
//     consumer when there is none) before it stores a group's head, unless
//     it knows them there (the dispatcher's trust, gateway/dispatch);
//   - a gateway making the consumer gives it the head subjects when the
//     queue had group messages at its last look at the shard (or when it
//     does not know): messages stored since had their heads made sure of.
//
// Older gateways store heads without looking: the group sweep makes sure
// of the head subjects when it finds a backlog, and EnsureHeads stores
// again the heads the consumer had looked past.

// consumerConfig is the config of queue's consumer for priority level p
// (0: the queue's own, for its unprioritized messages and its groups'
// heads).
func consumerConfig(queue string, p int, lim Limits) jetstream.ConsumerConfig {
	maxAck := -1
	if lim.MaxInflight > 0 {
		maxAck = lim.MaxInflight
	}
	c := jetstream.ConsumerConfig{
		Durable:           mapping.ConsumerName(queue),
		Description:       consumerDescription(queue),
		FilterSubject:     mapping.QueueSubject(queue),
		AckPolicy:         jetstream.AckExplicitPolicy,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckWait:           lim.AckWait,
		MaxDeliver:        -1,
		MaxAckPending:     maxAck,
		InactiveThreshold: mapping.ConsumerInactive,
		// Replicas stays 0, "as many as the stream": JetStream refuses a
		// consumer of a WorkQueue stream with another replica count (10134),
		// so a fixed count would make queues created by a gateway with
		// another --replicas, or scaled with nats stream edit, unusable here.
	}
	if p == 0 && lim.Heads {
		// The groups' heads (mapping/groups.go) are in the queue's order.
		c.FilterSubject = ""
		c.FilterSubjects = mapping.LevelSubjects(queue, 0)
	}
	if p > 0 {
		// A level's metadata always names the queue (the consumer name
		// has a "p<p>_" mark).
		c.Durable = mapping.PriorityConsumerName(queue, p)
		c.FilterSubject = mapping.PrioritySubject(queue, p)
		c.Metadata = map[string]string{mapping.MetaQueueName: queue}
	} else if c.Durable != mapping.EncodeName(queue) {
		c.Metadata = map[string]string{mapping.MetaQueueName: queue}
	}
	return c
}

// Made is the consumer MakeConsumer made or found.
type Made struct {
	// AckWait is the consumer's: one made earlier with a longer one keeps
	// it.
	AckWait time.Duration
	// Heads: the queue's own consumer reads its groups' heads.
	Heads bool
}

// MakeConsumer creates (or updates) the consumer of queue's priority level
// p (0: the queue's own) with lim (at least lim.AckWait), making the
// queue's shard stream first if need be. The queue's own consumer is made
// without the head subjects (lim.Heads false) only where none exists yet
// (or one with this very config): one with another config is updated, and
// then with them ("Group heads" above).
func (h Consumers) MakeConsumer(ctx context.Context, queue string, p int, lim Limits) (Made, error) {
	s := h.s
	op := "create queue consumer"
	if p > 0 {
		op = "create priority consumer"
	}
	k := mapping.Shard(queue)
	if _, err := s.Shards().Shard(ctx, k); err != nil {
		return Made{}, err
	}
	stream := mapping.ShardStream(k)
	var cons jetstream.Consumer
	var err error
	if p == 0 && !lim.Heads {
		cons, err = s.putConsumer(ctx, stream, consumerConfig(queue, 0, lim), putCreate)
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeConsumerExists {
			lim.Heads = true
			cons, err = s.putConsumer(ctx, stream, consumerConfig(queue, 0, lim), putCreateOrUpdate)
		}
	} else {
		cons, err = s.putConsumer(ctx, stream, consumerConfig(queue, p, lim), putCreateOrUpdate)
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s.shardLost(k)
	}
	if err != nil {
		return Made{}, Classify(op, err)
	}
	cfg := cons.CachedInfo().Config
	return Made{AckWait: cfg.AckWait, Heads: p == 0 && readsHeads(queue, cfg)}, nil
}

// readsHeads reports whether a queue's own consumer reads its groups'
// heads.
func readsHeads(queue string, c jetstream.ConsumerConfig) bool {
	h := mapping.HeadWildcard(queue)
	return c.FilterSubject == h || slices.Contains(c.FilterSubjects, h)
}

// UpdateConsumer updates queue's own consumer to lim, with the head
// subjects (an update never takes them away: "Group heads" above); exists
// is false (and err nil) when the consumer is not there (JetStream removed
// it unused: the next MakeConsumer makes it with the limits then in force).
func (h Consumers) UpdateConsumer(ctx context.Context, queue string, lim Limits) (exists bool, err error) {
	s := h.s
	lim.Heads = true
	_, err = s.putConsumer(ctx, mapping.StreamName(queue), consumerConfig(queue, 0, lim), putUpdate)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, nil
	}
	if err != nil {
		return true, Classify("update queue consumer", err)
	}
	return true, nil
}

// EnsureHeads makes sure queue's own consumer reads its groups' heads
// before a head is stored: one without them gets them (keeping a longer
// AckWait than lim's), and where there is none it is made with them and
// lim. The heads that a consumer without them had looked past (stored by
// older gateways) are stored again behind it (restoreHeads); added
// reports that it lacked them.
func (h Consumers) EnsureHeads(ctx context.Context, queue string, lim Limits) (made Made, added bool, err error) {
	s := h.s
	stream := mapping.StreamName(queue)
	cons, err := s.js.Consumer(ctx, stream, mapping.ConsumerName(queue))
	var passed uint64
	switch {
	case err == nil:
		info := cons.CachedInfo()
		if readsHeads(queue, info.Config) {
			return Made{AckWait: info.Config.AckWait, Heads: true}, false, nil
		}
		lim.AckWait = max(lim.AckWait, info.Config.AckWait)
		added, passed = true, info.Delivered.Stream
	case errors.Is(err, jetstream.ErrConsumerNotFound), errors.Is(err, jetstream.ErrStreamNotFound):
	default:
		return Made{}, false, Classify("look at queue consumer", err)
	}
	lim.Heads = true
	if made, err = s.Consumers().MakeConsumer(ctx, queue, 0, lim); err != nil {
		return Made{}, added, err
	}
	if passed > 0 {
		err = s.restoreHeads(ctx, queue, passed)
	}
	return made, added, err
}

// putAction is how putConsumer writes a consumer.
type putAction int

const (
	putCreateOrUpdate putAction = iota
	putCreate                   // fails (10148) when one exists with another config
	putUpdate                   // fails when none exists
)

// putConsumer creates or updates (as action says) a queue's or priority
// level's consumer c on stream, with the storage the store is configured
// for (Config.FileConsumers). JetStream never changes the storage of an
// existing consumer: it refuses the update with 10012 ("storage type can
// not be updated"). Such a consumer, made by an older version or by a
// gateway with the other setting, is used as it is: it may hold deliveries
// in flight, which deleting it would hand out again at once. It gives way to
// the configured storage when JetStream removes it unused
// (InactiveThreshold) and the next pull makes it again.
func (s *Store) putConsumer(ctx context.Context, stream string, c jetstream.ConsumerConfig, action putAction) (jetstream.Consumer, error) {
	put := s.js.CreateOrUpdateConsumer
	switch action {
	case putCreate:
		put = s.js.CreateConsumer
	case putUpdate:
		put = s.js.UpdateConsumer
	}
	c.MemoryStorage = !s.cfg.FileConsumers
	cons, err := put(ctx, stream, c)
	var apiErr *jetstream.APIError
	if err == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeConsumerCreate {
		return cons, err
	}
	// 10012 is JetStream's code for every refused consumer config: only a
	// consumer that is there with the other storage is worth a second try.
	have, ierr := s.js.Consumer(ctx, stream, c.Durable)
	if ierr != nil || have.CachedInfo().Config.MemoryStorage == c.MemoryStorage {
		return nil, err
	}
	c.MemoryStorage = have.CachedInfo().Config.MemoryStorage
	return put(ctx, stream, c)
}

// DeleteQueue removes queue's messages (of every kind: deliverable,
// priorities, delays, dead letters, parts) and its consumers, the queue's
// and its priority levels' (which exist only where levels were pulled
// from, by any gateway). Large bodies are DeleteQueueBodies'.
func (h Consumers) DeleteQueue(ctx context.Context, queue string) error {
	s := h.s
	st, err := s.dropMessages(ctx, queue)
	if err != nil {
		return err
	}
	stream := st.CachedInfo().Config.Name
	if err := s.js.DeleteConsumer(ctx, stream, mapping.ConsumerName(queue)); err != nil &&
		!errors.Is(err, jetstream.ErrConsumerNotFound) {
		return Classify("delete queue consumer", err)
	}
	for p := 1; p <= mapping.MaxPriority; p++ {
		if err := s.js.DeleteConsumer(ctx, stream, mapping.PriorityConsumerName(queue, p)); err != nil &&
			!errors.Is(err, jetstream.ErrConsumerNotFound) {
			return Classify("delete priority consumer", err)
		}
	}
	return nil
}

// DropMessages removes every message of queue (of every kind, as
// DeleteQueue), leaving its consumers. A stream purge needs no room in the
// store: a deletion calls it first when the store is full, to free the
// space its bookkeeping writes need.
func (h Consumers) DropMessages(ctx context.Context, queue string) error {
	s := h.s
	_, err := s.dropMessages(ctx, queue)
	return err
}

func (s *Store) dropMessages(ctx context.Context, queue string) (jetstream.Stream, error) {
	st, err := s.queueStream(ctx, queue)
	if err != nil {
		return nil, err
	}
	for _, subj := range mapping.QueueSubjects(queue) {
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			return nil, Classify("delete queue messages", err)
		}
	}
	return st, nil
}

// maxDescribedName bounds the queue name quoted in a consumer's description
// (`nats consumer ls` prints it in one table cell).
const maxDescribedName = 128

// consumerDescription names the queue in its consumer's description, so
// that NATS tools tell the queues apart; long names are cut.
func consumerDescription(queue string) string {
	r := []rune(queue)
	if len(r) > maxDescribedName {
		return fmt.Sprintf("lmq queue %q…", string(r[:maxDescribedName]))
	}
	return fmt.Sprintf("lmq queue %q", queue)
}
