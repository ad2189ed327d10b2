package gateway

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// registry knows the queues that exist (streams named LMQ_*), across gateways:
// it lists them at start and follows JetStream's stream created/deleted
// advisories. It also holds this gateway's per-queue dispatcher state.
type registry struct {
	g       *Gateway
	mu      sync.Mutex
	known   map[string]string      // stream name → queue name, every existing queue
	states  map[string]*queueState // queue name → local state (queues this gateway used)
	created chan struct{}          // closed and replaced whenever a queue appears
	subs    []*nats.Subscription
}

func newRegistry(g *Gateway) *registry {
	return &registry{
		g:       g,
		known:   make(map[string]string),
		states:  make(map[string]*queueState),
		created: make(chan struct{}),
	}
}

func (r *registry) start(ctx context.Context) error {
	// A NATS wildcard is a whole token ("LMQ_*" would match only a stream
	// literally named so): take every stream's advisory and keep the queues'.
	for _, subj := range []string{advisoryCreated + "*", advisoryDeleted + "*"} {
		sub, err := r.g.nc.Subscribe(subj, r.g.counted(r.onAdvisory))
		if err != nil {
			return fmt.Errorf("subscribe stream advisories: %w", err)
		}
		r.subs = append(r.subs, sub)
	}
	names := r.g.js.StreamNames(ctx)
	var streams []string
	for s := range names.Name() {
		if _, ok := mapping.QueueFromStream(s); ok {
			streams = append(streams, s)
		}
	}
	if err := names.Err(); err != nil {
		return fmt.Errorf("list queues: %w", err)
	}
	for _, s := range streams {
		name, err := r.queueNameOf(ctx, s)
		if err != nil {
			r.g.log.Warn("skipping stream", "stream", s, "err", err)
			continue
		}
		r.addKnown(s, name)
	}
	return nil
}

func (r *registry) stop() {
	for _, s := range r.subs {
		_ = s.Unsubscribe()
	}
	r.mu.Lock()
	states := make([]*queueState, 0, len(r.states))
	for _, q := range r.states {
		states = append(states, q)
	}
	r.mu.Unlock()
	for _, q := range states {
		q.shutdown()
	}
}

// queueNameOf finds the queue name of a stream: decoded from its name, or from
// its metadata for hashed (long) names.
func (r *registry) queueNameOf(ctx context.Context, stream string) (string, error) {
	enc, _ := mapping.QueueFromStream(stream)
	if name, ok := mapping.DecodeName(enc); ok {
		return name, nil
	}
	st, err := r.g.js.Stream(ctx, stream)
	if err != nil {
		return "", err
	}
	name := st.CachedInfo().Config.Metadata[mapping.MetaQueueName]
	if name == "" {
		return "", errors.New("no queue name in metadata")
	}
	return name, nil
}

func (r *registry) onAdvisory(m *nats.Msg) {
	stream := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	if _, ok := mapping.QueueFromStream(stream); !ok {
		return // not a queue's stream (buckets, migration journal, …)
	}
	if strings.HasPrefix(m.Subject, advisoryDeleted) {
		r.mu.Lock()
		name, ok := r.known[stream]
		delete(r.known, stream)
		q := r.states[name]
		if ok && q != nil {
			delete(r.states, name)
		}
		r.mu.Unlock()
		if q != nil {
			q.shutdown()
		}
		return
	}
	// Resolving a hashed name needs a JetStream request, which must not run
	// on the subscription's goroutine.
	r.g.spawn(func(life context.Context) {
		ctx, cancel := context.WithTimeout(life, opTimeout)
		defer cancel()
		name, err := r.queueNameOf(ctx, stream)
		if err != nil {
			return
		}
		r.addKnown(stream, name)
	})
}

func (r *registry) addKnown(stream, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.known[stream]; ok {
		return
	}
	r.known[stream] = name
	close(r.created)
	r.created = make(chan struct{})
}

// localByEnc finds local queue state by encoded name.
func (r *registry) localByEnc(enc string) *queueState {
	r.mu.Lock()
	defer r.mu.Unlock()
	name, ok := r.known[mapping.StreamPrefix+enc]
	if !ok {
		return nil
	}
	return r.states[name]
}

// matching returns the existing queues whose names match re, sorted, and a
// channel closed when a new queue appears.
func (r *registry) matching(re *regexp.Regexp) ([]string, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, name := range r.known {
		if re.MatchString(name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, r.created
}

// names returns every existing queue, sorted.
func (r *registry) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.known))
	for _, n := range r.known {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// local returns the queue's local state if this gateway has it.
func (r *registry) local(queue string) *queueState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.states[queue]
}

// ensure returns the queue's local state, creating the queue (stream and
// consumer) when it does not exist.
func (r *registry) ensure(ctx context.Context, queue string) (*queueState, error) {
	return r.bind(ctx, queue, true)
}

// open returns the local state of an existing queue and ErrNotFound when the
// queue does not exist: for the regexp operations, which must never bring
// back a queue that another gateway deleted after this one listed it.
func (r *registry) open(ctx context.Context, queue string) (*queueState, error) {
	return r.bind(ctx, queue, false)
}

func (r *registry) bind(ctx context.Context, queue string, mayCreate bool) (*queueState, error) {
	r.mu.Lock()
	q := r.states[queue]
	r.mu.Unlock()
	if q != nil {
		return q, nil
	}
	if err := validName(queue); err != nil {
		return nil, err
	}
	q, err := r.create(ctx, queue, mayCreate)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if prev := r.states[queue]; prev != nil {
		r.mu.Unlock()
		q.shutdown()
		return prev, nil
	}
	r.states[queue] = q
	r.mu.Unlock()
	r.addKnown(q.stream, queue)
	return q, nil
}

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

// create makes the queue's stream (unless !mayCreate: then the stream must
// exist) and its consumer, and the local state.
func (r *registry) create(ctx context.Context, queue string, mayCreate bool) (*queueState, error) {
	g := r.g
	stream := mapping.StreamName(queue)
	scfg := streamConfig(queue, g.cfg.Replicas)
	var err error
	if mayCreate {
		_, err = g.js.CreateStream(ctx, scfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			err = r.upgrade(ctx, scfg)
		}
	} else {
		err = r.upgrade(ctx, scfg)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			r.forget(queue)
			return nil, fmt.Errorf("queue %q: %w", queue, ErrNotFound)
		}
	}
	if err != nil {
		return nil, jsErr("create queue", err)
	}
	eff := g.props.effective(queue)
	ackWait := backstop(eff.TimeoutDuration())
	cons, err := g.js.CreateOrUpdateConsumer(ctx, stream, r.consumerConfig(queue, ackWait))
	if err != nil {
		return nil, jsErr("create queue consumer", err)
	}
	q, err := newQueueState(g, queue, stream)
	if err != nil {
		return nil, err
	}
	q.ackWait = cons.CachedInfo().Config.AckWait
	return q, nil
}

// streamConfig is the stream of a queue. The features beyond LMQ need stream
// settings that JetStream does not let us turn off again (per-message TTL,
// schedules for delays, atomic batches); they cost nothing while unused, so
// every queue gets them from the start.
func streamConfig(queue string, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:               mapping.StreamName(queue),
		Description:        streamDescription(queue),
		Subjects:           mapping.StreamSubjects(queue),
		Retention:          jetstream.WorkQueuePolicy,
		Storage:            jetstream.FileStorage,
		Replicas:           replicas,
		Metadata:           map[string]string{mapping.MetaQueueName: queue},
		AllowMsgTTL:        true,
		AllowMsgSchedules:  true,
		AllowAtomicPublish: true,
		AllowRollup:        true, // implied by schedules; set so configs compare equal
	}
}

// maxDescribedName bounds the queue name quoted in a stream's description
// (JetStream allows 4 KiB, queue names 255 bytes; `nats stream ls` prints
// it in one table cell).
const maxDescribedName = 128

// streamDescription names the queue in the stream's description, so that
// `nats stream ls` tells the queues apart; long names are cut (the full name
// is in the metadata key lmq.name).
func streamDescription(queue string) string {
	r := []rune(queue)
	if len(r) > maxDescribedName {
		return fmt.Sprintf("lmq queue %q…", string(r[:maxDescribedName]))
	}
	return fmt.Sprintf("lmq queue %q", queue)
}

// upgrade brings an existing queue stream (made by an older version, or with
// other replicas) up to the settings this version needs, keeping its replicas.
func (r *registry) upgrade(ctx context.Context, want jetstream.StreamConfig) error {
	st, err := r.g.js.Stream(ctx, want.Name)
	if err != nil {
		return err
	}
	have := st.CachedInfo().Config
	if slices.Equal(have.Subjects, want.Subjects) && have.AllowMsgTTL && have.AllowMsgSchedules && have.AllowAtomicPublish &&
		have.Description == want.Description {
		return nil
	}
	have.Subjects = want.Subjects
	have.Description = want.Description
	have.AllowMsgTTL, have.AllowMsgSchedules, have.AllowAtomicPublish, have.AllowRollup = true, true, true, true
	have.DenyPurge = false
	if _, err := r.g.js.UpdateStream(ctx, have); err != nil {
		return fmt.Errorf("upgrade stream %s: %w", want.Name, err)
	}
	return nil
}

func (r *registry) consumerConfig(queue string, ackWait time.Duration) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       mapping.ConsumerName,
		Description:   "lmq deliveries",
		FilterSubject: mapping.QueueSubject(queue),
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       ackWait,
		MaxDeliver:    -1,
		MaxAckPending: -1,
		// Replicas stays 0, "as many as the stream": JetStream refuses a
		// consumer of a WorkQueue stream with another replica count (10134),
		// so a fixed count would make queues created by a gateway with
		// another --replicas, or scaled with nats stream edit, unusable here.
	}
}

// ensureAckWait raises the consumer's AckWait when the queue's timeout grew, so
// that JetStream's backstop never fires before the gateway's own timer.
func (r *registry) ensureAckWait(ctx context.Context, q *queueState, timeout time.Duration) error {
	want := backstop(timeout)
	q.mu.Lock()
	have := q.ackWait
	q.mu.Unlock()
	if want <= have {
		return nil
	}
	if _, err := r.g.js.UpdateConsumer(ctx, q.stream, r.consumerConfig(q.name, want)); err != nil {
		return jsErr("update queue consumer", err)
	}
	q.mu.Lock()
	if want > q.ackWait {
		q.ackWait = want
	}
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

// forget drops the local state of a queue that turned out not to exist.
func (r *registry) forget(queue string) {
	r.mu.Lock()
	q := r.states[queue]
	delete(r.states, queue)
	delete(r.known, mapping.StreamName(queue))
	r.mu.Unlock()
	if q != nil {
		q.shutdown()
	}
}

// DeleteQueue drops the queue and all its messages; ErrNotFound if it does not
// exist.
func (g *Gateway) DeleteQueue(ctx context.Context, queue string) error {
	if err := validName(queue); err != nil {
		return err
	}
	err := g.js.DeleteStream(ctx, mapping.StreamName(queue))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		g.queues.forget(queue)
		return fmt.Errorf("queue %q: %w", queue, ErrNotFound)
	}
	if err != nil {
		return jsErr("delete queue", err)
	}
	g.queues.forget(queue)
	g.dels.dropQueue(queue)
	if err := g.dropOwnProps(ctx, queue); err != nil {
		return err
	}
	g.deleteQueueObjects(ctx, queue)
	return nil
}

// QueueNames lists every existing queue, sorted.
func (g *Gateway) QueueNames() []string { return g.queues.names() }
