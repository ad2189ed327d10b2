package store

import (
	"context"
	"errors"
	"fmt"
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
}

// consumerConfig is the config of queue's consumer for priority level p
// (0: the queue's own, for its unprioritized messages and its groups'
// heads).
func consumerConfig(queue string, p int, lim Limits) jetstream.ConsumerConfig {
	maxAck := -1
	if lim.MaxInflight > 0 {
		maxAck = lim.MaxInflight
	}
	c := jetstream.ConsumerConfig{
		Durable:     mapping.ConsumerName(queue),
		Description: consumerDescription(queue),
		// The groups' heads (mapping/groups.go) are in the queue's order.
		FilterSubjects:    []string{mapping.QueueSubject(queue), mapping.HeadWildcard(queue)},
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
	if p > 0 {
		// A level's metadata always names the queue (the consumer name
		// has a "p<p>_" mark).
		c.Durable = mapping.PriorityConsumerName(queue, p)
		c.FilterSubjects = nil
		c.FilterSubject = mapping.PrioritySubject(queue, p)
		c.Metadata = map[string]string{mapping.MetaQueueName: queue}
	} else if c.Durable != mapping.EncodeName(queue) {
		c.Metadata = map[string]string{mapping.MetaQueueName: queue}
	}
	return c
}

// MakeConsumer creates (or updates) the consumer of queue's priority level
// p (0: the queue's own) with lim (at least lim.AckWait), making the
// queue's shard stream first if need be, and returns the AckWait the
// consumer has (one made earlier with a longer one keeps it).
func (s *Store) MakeConsumer(ctx context.Context, queue string, p int, lim Limits) (time.Duration, error) {
	op := "create queue consumer"
	if p > 0 {
		op = "create priority consumer"
	}
	k := mapping.Shard(queue)
	if _, err := s.Shard(ctx, k); err != nil {
		return 0, err
	}
	cons, err := s.putConsumer(ctx, mapping.ShardStream(k), consumerConfig(queue, p, lim), false)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s.shardLost(k)
	}
	if err != nil {
		return 0, Classify(op, err)
	}
	return cons.CachedInfo().Config.AckWait, nil
}

// UpdateConsumer updates queue's own consumer to lim; exists is false (and
// err nil) when the consumer is not there (JetStream removed it unused: the
// next MakeConsumer makes it with the limits then in force).
func (s *Store) UpdateConsumer(ctx context.Context, queue string, lim Limits) (exists bool, err error) {
	_, err = s.putConsumer(ctx, mapping.StreamName(queue), consumerConfig(queue, 0, lim), true)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, nil
	}
	if err != nil {
		return true, Classify("update queue consumer", err)
	}
	return true, nil
}

// putConsumer creates or updates (update: only updates) a queue's or
// priority level's consumer c on stream, with the storage the store is
// configured for (Config.FileConsumers). JetStream never changes the storage
// of an existing consumer: it refuses the update with 10012 ("storage type
// can not be updated"). Such a consumer, made by an older version or by a
// gateway with the other setting, is used as it is: it may hold deliveries
// in flight, which deleting it would hand out again at once. It gives way to
// the configured storage when JetStream removes it unused
// (InactiveThreshold) and the next pull makes it again.
func (s *Store) putConsumer(ctx context.Context, stream string, c jetstream.ConsumerConfig, update bool) (jetstream.Consumer, error) {
	put := s.js.CreateOrUpdateConsumer
	if update {
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
func (s *Store) DeleteQueue(ctx context.Context, queue string) error {
	st, err := s.QueueShard(ctx, queue)
	if err != nil {
		return err
	}
	for _, subj := range mapping.QueueSubjects(queue) {
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			return Classify("delete queue messages", err)
		}
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
