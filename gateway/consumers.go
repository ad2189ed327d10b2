package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// A queue's durable pull consumer: its config, its storage, and its
// AckWait kept a margin above the queue's timeout (package doc,
// "Deliveries" and "Consumer storage").

// backstop is the consumer AckWait for a queue timeout: JetStream redelivers
// on its own only when the gateway that held the delivery is gone, so it must
// stay clear of the gateway's own timer.
func backstop(timeout time.Duration) time.Duration {
	margin := timeout / 10
	if margin < 5*time.Second {
		margin = 5 * time.Second
	}
	return timeout + margin
}

func consumerConfig(queue string, ackWait time.Duration) jetstream.ConsumerConfig {
	c := jetstream.ConsumerConfig{
		Durable:           mapping.ConsumerName(queue),
		Description:       streamDescription(queue),
		FilterSubject:     mapping.QueueSubject(queue),
		AckPolicy:         jetstream.AckExplicitPolicy,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckWait:           ackWait,
		MaxDeliver:        -1,
		MaxAckPending:     -1,
		InactiveThreshold: mapping.ConsumerInactive,
		// Replicas stays 0, "as many as the stream": JetStream refuses a
		// consumer of a WorkQueue stream with another replica count (10134),
		// so a fixed count would make queues created by a gateway with
		// another --replicas, or scaled with nats stream edit, unusable here.
	}
	if c.Durable != mapping.EncodeName(queue) {
		c.Metadata = map[string]string{mapping.MetaQueueName: queue}
	}
	return c
}

// putConsumer creates or updates (update: only updates) a queue's or
// priority level's consumer c on stream, with the storage the gateway is
// configured for (Config.FileConsumers). JetStream never changes the storage
// of an existing consumer: it refuses the update with 10012 ("storage type
// can not be updated"). Such a consumer, made by an older version or by a
// gateway with the other setting, is used as it is: it may hold deliveries
// in flight, which deleting it would hand out again at once. It gives way to
// the configured storage when JetStream removes it unused
// (InactiveThreshold) and the next pull makes it again.
func (g *Gateway) putConsumer(ctx context.Context, stream string, c jetstream.ConsumerConfig, update bool) (jetstream.Consumer, error) {
	put := g.js.CreateOrUpdateConsumer
	if update {
		put = g.js.UpdateConsumer
	}
	c.MemoryStorage = !g.cfg.FileConsumers
	cons, err := put(ctx, stream, c)
	var apiErr *jetstream.APIError
	if err == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeConsumerCreate {
		return cons, err
	}
	// 10012 is JetStream's code for every refused consumer config: only a
	// consumer that is there with the other storage is worth a second try.
	have, ierr := g.js.Consumer(ctx, stream, c.Durable)
	if ierr != nil || have.CachedInfo().Config.MemoryStorage == c.MemoryStorage {
		return nil, err
	}
	c.MemoryStorage = have.CachedInfo().Config.MemoryStorage
	return put(ctx, stream, c)
}

// maxDescribedName bounds the queue name quoted in a consumer's description
// (`nats consumer ls` prints it in one table cell).
const maxDescribedName = 128

// streamDescription names the queue in its consumer's description, so that
// NATS tools tell the queues apart; long names are cut.
func streamDescription(queue string) string {
	r := []rune(queue)
	if len(r) > maxDescribedName {
		return fmt.Sprintf("lmq queue %q…", string(r[:maxDescribedName]))
	}
	return fmt.Sprintf("lmq queue %q", queue)
}

// ensureAckWait raises the consumer's AckWait when the queue's timeout grew, so
// that JetStream's backstop never fires before the gateway's own timer.
func (r *registry) ensureAckWait(ctx context.Context, q *queueState, timeout time.Duration) error {
	want := backstop(timeout)
	q.mu.Lock()
	have, ready := q.ackWait, q.ready
	if !ready && want > have {
		q.ackWait = want // the consumer, when made, starts with it
	}
	q.mu.Unlock()
	if want <= have || !ready {
		return nil
	}
	if _, err := r.g.putConsumer(ctx, q.stream, consumerConfig(q.name, want), true); err != nil {
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			q.mu.Lock()
			q.ready = false
			q.ackWait = max(q.ackWait, want)
			q.mu.Unlock()
			return nil
		}
		return jsErr("update queue consumer", err)
	}
	q.mu.Lock()
	if want > q.ackWait {
		q.ackWait = want
	}
	q.prio.ready = 0 // priority consumers are updated when next used
	q.mu.Unlock()
	return nil
}

// applyProps brings the consumer in line with changed properties.
func (r *registry) applyProps(ctx context.Context, queue string) error {
	q := r.local(queue)
	if q == nil {
		return nil
	}
	return r.ensureAckWait(ctx, q, r.g.props.effective(queue).TimeoutDuration())
}
