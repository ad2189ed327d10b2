package gateway

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// registry knows the queues that exist, across gateways: it mirrors the
// LMQ_QUEUES bucket (a queue exists while its key does), creates the shard
// streams on first use, and holds this gateway's per-queue dispatcher state.
type registry struct {
	g  *Gateway
	kv jetstream.KeyValue
	f  *kvFollower // follows kv; own writes are noted there (ownwrites.go)

	mu      sync.Mutex
	known   map[string]string       // encoded name → queue name, every existing queue
	pending map[string]int          // encoded name → reservations of a queue being created (reserve)
	states  map[string]*queueState  // queue name → local state (queues this gateway used)
	byEnc   map[string]*queueState  // the same, by encoded name
	anyWait map[*anyWaiter]struct{} // waiting pull-anys (scan.go)
	// anyCount is len(anyWait), read without the lock on every notification.
	anyCount atomic.Int32

	// active holds the queue states with waiting clients (or that had them
	// at the last re-poll): the re-poll loop looks at these only. Its lock
	// is taken under a queueState's, never the other way round.
	activeMu sync.Mutex
	active   map[*queueState]struct{}
	// activeWake wakes the re-poll loop, asleep while active is empty,
	// when the first queue becomes busy.
	activeWake chan struct{}

	shardMu sync.Mutex // serializes creating shard streams
	shards  [mapping.ShardCount]shardState
	scan    scanCache
}

// shardState caches a shard stream's handle once it is known to exist.
type shardState struct {
	mu sync.Mutex
	st jetstream.Stream
}

func newRegistry(g *Gateway) *registry {
	return &registry{
		g:          g,
		known:      make(map[string]string),
		pending:    make(map[string]int),
		states:     make(map[string]*queueState),
		byEnc:      make(map[string]*queueState),
		anyWait:    make(map[*anyWaiter]struct{}),
		active:     make(map[*queueState]struct{}),
		activeWake: make(chan struct{}, 1),
	}
}

func (r *registry) start(ctx context.Context) error {
	kv, err := r.g.openBucket(ctx, mapping.QueuesBucket, "lmq-gateway queues: a queue exists while its key does")
	if err != nil {
		return fmt.Errorf("queue registry: %w", err)
	}
	r.kv = kv
	if r.f, err = r.g.followBucket(ctx, kv, "queue registry", r.apply, r.replayed); err != nil {
		return err
	}
	return r.adopt(ctx)
}

func (r *registry) stop() {
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

// apply follows one change of the registry bucket.
func (r *registry) apply(e jetstream.KeyValueEntry) {
	enc := e.Key()
	name, ok := mapping.DecodeName(enc)
	if !ok {
		return // not a key of ours
	}
	if e.Operation() == jetstream.KeyValuePut {
		r.addKnown(enc, name)
		return
	}
	r.drop(enc)
}

// replayed forgets queues the bucket lost while the watch was down.
func (r *registry) replayed(present map[string]bool) {
	r.mu.Lock()
	var gone []string
	for enc := range r.known {
		if !present[enc] {
			gone = append(gone, enc)
		}
	}
	r.mu.Unlock()
	for _, enc := range gone {
		r.drop(enc)
	}
}

// drop forgets a deleted queue and ends its local state: its waiting
// clients answer empty.
func (r *registry) drop(enc string) {
	r.mu.Lock()
	name, ok := r.known[enc]
	delete(r.known, enc)
	q := r.byEnc[enc]
	if ok && q != nil {
		delete(r.states, name)
		delete(r.byEnc, enc)
	}
	r.mu.Unlock()
	if q != nil {
		q.shutdown()
	}
}

func (r *registry) addKnown(enc, name string) {
	r.mu.Lock()
	r.known[enc] = name
	r.mu.Unlock()
}

func (r *registry) isKnown(queue string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.known[mapping.EncodeName(queue)]
	return ok
}

// exists reports whether the queue exists: known here, or registered by
// another gateway a moment ago (its key is read to be sure).
func (r *registry) exists(ctx context.Context, queue string) (bool, error) {
	if r.isKnown(queue) {
		return true, nil
	}
	enc := mapping.EncodeName(queue)
	_, err := r.kv.Get(ctx, enc)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, jsErr("queue registry", err)
	}
	r.addKnown(enc, queue)
	return true, nil
}

// register makes the queue exist: its shard stream and its registry key.
// The key is written before any message can be, so that no stored message
// belongs to a queue nobody knows.
func (r *registry) register(ctx context.Context, queue string) error {
	if r.isKnown(queue) {
		return nil
	}
	if _, err := r.shard(ctx, mapping.Shard(queue)); err != nil {
		return err
	}
	enc := mapping.EncodeName(queue)
	rev, err := r.kv.Create(ctx, enc, []byte(queue))
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return jsErr("create queue", err)
	}
	if err == nil {
		r.f.wrote(enc, rev)
	}
	r.addKnown(enc, queue)
	return nil
}

// reserve makes room within Config.MaxQueues for creating queue, for a
// caller about to register it; release (never nil) ends the reservation, to
// be called once the queue is registered (it then counts as known) or was
// not. A queue that exists needs no room. Reservations of one name share a
// place, so a caller holding one may still create the queue through bind.
//
// The count is this gateway's mirror of the registry bucket, which every
// gateway on the JetStream shares, plus the queues being created here, so
// the bound is exact on one gateway. Another gateway's new queue reaches the
// mirror a moment later (the bucket's watch, milliseconds): gateways
// creating queues at the same moment may each take the places they saw free,
// and together pass the bound by those; it then refuses new queues until
// enough are deleted. Queues adopted at the start (holding messages without
// a key) are registered without a place: refusing them would strand their
// messages.
func (r *registry) reserve(ctx context.Context, queue string) (release func(), err error) {
	limit := r.g.cfg.MaxQueues
	if limit <= 0 {
		return func() {}, nil
	}
	enc := mapping.EncodeName(queue)
	r.mu.Lock()
	_, known := r.known[enc]
	count := r.countLocked()
	full := !known && r.pending[enc] == 0 && count >= limit
	if !known && !full {
		r.pending[enc]++
	}
	r.mu.Unlock()
	switch {
	case known:
		return func() {}, nil
	case !full:
		var once sync.Once
		return func() {
			once.Do(func() {
				r.mu.Lock()
				defer r.mu.Unlock()
				if r.pending[enc]--; r.pending[enc] <= 0 {
					delete(r.pending, enc)
				}
			})
		}, nil
	}
	// Full, unless another gateway made this very queue a moment ago.
	ok, err := r.exists(ctx, queue)
	if err != nil {
		return nil, err
	}
	if ok {
		return func() {}, nil
	}
	return nil, fmt.Errorf("%w: queue %q not created: %d queues exist and the max-queues limit is %d; delete a queue or raise the limit",
		ErrTooManyQueues, queue, count, limit)
}

// countLocked is the number of queues that exist or are being created here.
func (r *registry) countLocked() int {
	n := len(r.known)
	for enc := range r.pending {
		if _, ok := r.known[enc]; !ok {
			n++
		}
	}
	return n
}

// deleteKey deletes the queue's registry key at the revision it reads
// (ErrNotFound when there is none), marked as this gateway's own write.
func (r *registry) deleteKey(ctx context.Context, queue, enc string) (err error) {
	done := r.f.removing(enc)
	defer func() { done(ctx, err == nil) }()
	for attempt := 0; ; attempt++ {
		e, err := r.kv.Get(ctx, enc)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			r.forget(queue)
			return fmt.Errorf("queue %q: %w", queue, ErrNotFound)
		}
		if err != nil {
			return jsErr("delete queue", err)
		}
		err = r.kv.Delete(ctx, enc, jetstream.LastRevision(e.Revision()))
		if err == nil {
			return nil
		}
		if attempt >= 3 || !isWrongLastSequence(err) {
			return jsErr("delete queue", err)
		}
	}
}

// cachedShard is shard k's stream if this gateway has made or seen it.
func (r *registry) cachedShard(k int) jetstream.Stream {
	s := &r.shards[k]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// shard returns shard k's stream, creating it on first use (or bringing
// one made by an older version up to date).
func (r *registry) shard(ctx context.Context, k int) (jetstream.Stream, error) {
	if st := r.cachedShard(k); st != nil {
		return st, nil
	}
	r.shardMu.Lock()
	defer r.shardMu.Unlock()
	if st := r.cachedShard(k); st != nil {
		return st, nil
	}
	want := shardConfig(k, r.g.cfg.Replicas)
	st, err := r.g.js.CreateStream(ctx, want)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		st, err = r.upgradeShard(ctx, want)
	}
	if err != nil {
		return nil, jsErr("create queue stream", err)
	}
	s := &r.shards[k]
	s.mu.Lock()
	s.st = st
	s.mu.Unlock()
	return st, nil
}

// lookupShard returns shard k's stream if it exists (nil if not), without
// creating it: another gateway may have made it since this one started.
func (r *registry) lookupShard(ctx context.Context, k int) (jetstream.Stream, error) {
	if st := r.cachedShard(k); st != nil {
		return st, nil
	}
	_, err := r.g.js.Stream(ctx, mapping.ShardStream(k))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, jsErr("queue stream", err)
	}
	return r.shard(ctx, k)
}

// shardLost forgets shard k's stream after JetStream said it is gone (an
// operator deleted it): the next use creates it again.
func (r *registry) shardLost(k int) {
	s := &r.shards[k]
	s.mu.Lock()
	s.st = nil
	s.mu.Unlock()
}

// adopt finds the shard streams that exist and registers queues that have
// messages but no registry key: pushed by a gateway that had not yet seen
// the queue deleted, or published by a NATS program straight into a new
// queue's subject. A message is never left where no client can reach it.
func (r *registry) adopt(ctx context.Context) error {
	names := r.g.js.StreamNames(ctx)
	var shards []int
	for s := range names.Name() {
		if k, ok := mapping.ShardFromStream(s); ok {
			shards = append(shards, k)
		}
	}
	if err := names.Err(); err != nil {
		return fmt.Errorf("list queue streams: %w", err)
	}
	for _, k := range shards {
		st, err := r.shard(ctx, k)
		if err != nil {
			return err
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(mapping.SubjectPrefix+".>"))
		if err != nil {
			return jsErr("list queues", err)
		}
		for subj := range info.State.Subjects {
			_, enc, ok := mapping.ParseSubject(subj)
			if !ok {
				continue
			}
			name, ok := mapping.DecodeName(enc)
			if !ok || r.isKnown(name) {
				continue
			}
			r.g.log.Info("registering a queue that has messages but no registry key", "queue", name)
			if err := r.register(ctx, name); err != nil {
				return err
			}
		}
	}
	return nil
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
// Neither is used (BENCHMARKS.md "CPU per message", issue 19 closing note).
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
	}
}

// upgradeShard brings an existing shard stream (made by an older version, or
// edited) up to the settings this version needs, keeping its replicas.
func (r *registry) upgradeShard(ctx context.Context, want jetstream.StreamConfig) (jetstream.Stream, error) {
	st, err := r.g.js.Stream(ctx, want.Name)
	if err != nil {
		return nil, err
	}
	have := st.CachedInfo().Config
	if have.AllowMsgTTL && have.AllowMsgSchedules && have.AllowAtomicPublish && subjectsCover(have.Subjects, want.Subjects) {
		return st, nil
	}
	have.Subjects = want.Subjects
	have.AllowMsgTTL, have.AllowMsgSchedules, have.AllowAtomicPublish, have.AllowRollup = true, true, true, true
	have.DenyPurge = false
	if _, err := r.g.js.UpdateStream(ctx, have); err != nil {
		return nil, fmt.Errorf("upgrade stream %s: %w", want.Name, err)
	}
	return r.g.js.Stream(ctx, want.Name)
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

// busy marks q as having waiting clients (called under q.mu).
func (r *registry) busy(q *queueState) {
	r.activeMu.Lock()
	first := len(r.active) == 0
	r.active[q] = struct{}{}
	r.activeMu.Unlock()
	if first {
		select {
		case r.activeWake <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// idle unmarks q, which has no waiting client and no request out (called
// under q.mu).
func (r *registry) idle(q *queueState) {
	r.activeMu.Lock()
	delete(r.active, q)
	r.activeMu.Unlock()
}

// busyStates returns the queue states marked busy.
func (r *registry) busyStates() []*queueState {
	r.activeMu.Lock()
	defer r.activeMu.Unlock()
	out := make([]*queueState, 0, len(r.active))
	for q := range r.active {
		out = append(out, q)
	}
	return out
}

// localByEnc finds local queue state by encoded name.
func (r *registry) localByEnc(enc string) *queueState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byEnc[enc]
}

// matching returns the existing queues of scope whose names match re,
// sorted.
func (r *registry) matching(re *regexp.Regexp, scope Scope) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, name := range r.known {
		if re.MatchString(name) && scope.Allows(name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
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

// ensure returns the queue's local state, creating the queue when it does
// not exist.
func (r *registry) ensure(ctx context.Context, queue string) (*queueState, error) {
	return r.bind(ctx, queue, true)
}

// open returns the local state of an existing queue and ErrNotFound when the
// queue does not exist: for the regexp operations, which must never bring
// back a queue that another gateway deleted after this one listed it.
func (r *registry) open(ctx context.Context, queue string) (*queueState, error) {
	return r.bind(ctx, queue, false)
}

// bind returns the queue's local state. A queue's state costs no JetStream
// resource: its consumer is made on the first pull (queueState.ready).
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
	if mayCreate {
		release, err := r.reserve(ctx, queue)
		if err != nil {
			return nil, err
		}
		err = r.register(ctx, queue)
		release()
		if err != nil {
			return nil, err
		}
	} else if ok, err := r.exists(ctx, queue); err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("queue %q: %w", queue, ErrNotFound)
	}
	q = newQueueState(r.g, queue)
	q.ackWait = backstop(r.g.props.effective(queue).TimeoutDuration())
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev := r.states[queue]; prev != nil {
		return prev, nil
	}
	if _, ok := r.known[q.enc]; !ok {
		// Deleted (by another gateway) while it was being bound.
		return nil, fmt.Errorf("queue %q: %w", queue, ErrNotFound)
	}
	r.states[queue] = q
	r.byEnc[q.enc] = q
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

// forget drops the local state of a queue that turned out not to exist.
func (r *registry) forget(queue string) { r.drop(mapping.EncodeName(queue)) }

// DeleteQueue drops the queue and all its messages; ErrNotFound if it does not
// exist.
//
// The registry key goes first, so that every gateway stops serving the
// queue; then its messages, its consumer, its properties and large bodies. A
// push through a gateway that has not yet heard of the deletion may still
// land after the purge: such a message is not lost, the next start of any
// gateway registers its queue again (registry.adopt).
func (g *Gateway) DeleteQueue(ctx context.Context, queue string) error {
	if err := validName(queue); err != nil {
		return err
	}
	// The registry itself, not this gateway's mirror of it, says whether
	// the queue exists: a deletion through another gateway a moment ago
	// must answer 404 here too. Deleting at the revision read makes two
	// deletions at once answer 204 once.
	enc := mapping.EncodeName(queue)
	if err := g.queues.deleteKey(ctx, queue, enc); err != nil {
		return err
	}
	g.queues.forget(queue)
	g.dels.dropQueue(queue)
	st, err := g.queues.shard(ctx, mapping.Shard(queue))
	if err != nil {
		return err
	}
	for _, subj := range mapping.QueueSubjects(queue) {
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			return jsErr("delete queue messages", err)
		}
	}
	if err := g.js.DeleteConsumer(ctx, st.CachedInfo().Config.Name, mapping.ConsumerName(queue)); err != nil &&
		!errors.Is(err, jetstream.ErrConsumerNotFound) {
		return jsErr("delete queue consumer", err)
	}
	// Its priorities' consumers, which exist only where levels were pulled
	// from (and any gateway may have done that).
	for p := 1; p <= mapping.MaxPriority; p++ {
		if err := g.js.DeleteConsumer(ctx, st.CachedInfo().Config.Name, mapping.PriorityConsumerName(queue, p)); err != nil &&
			!errors.Is(err, jetstream.ErrConsumerNotFound) {
			return jsErr("delete priority consumer", err)
		}
	}
	if err := g.dropOwnProps(ctx, queue); err != nil {
		return err
	}
	g.deleteQueueObjects(ctx, queue)
	return nil
}

// isWrongLastSequence reports a KV write refused because the key changed
// since it was read.
func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		errors.Is(err, jetstream.ErrKeyExists)
}

// QueueNames lists every existing queue, sorted.
func (g *Gateway) QueueNames() []string { return g.queues.names() }
