package gateway

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/kvfollow"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// registry knows the queues that exist, across gateways: it mirrors the
// LMQ_QUEUES bucket (a queue exists while its key does), has the store make
// the shard streams on first use, and holds this gateway's per-queue
// dispatcher state.
type registry struct {
	g  *Gateway
	kv jetstream.KeyValue
	f  *kvfollow.Follower // follows kv; own writes are noted there (kvfollow)

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
	if _, err := r.g.store.QueueShard(ctx, queue); err != nil {
		return err
	}
	enc := mapping.EncodeName(queue)
	rev, err := r.kv.Create(ctx, enc, []byte(queue))
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return jsErr("create queue", err)
	}
	if err == nil {
		r.f.Wrote(enc, rev)
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
	done := r.f.Removing(enc)
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
	q.ackWait = store.Backstop(r.g.props.Effective(queue).TimeoutDuration())
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
	if err := g.store.DeleteQueue(ctx, queue); err != nil {
		return err
	}
	if err := g.dropOwnProps(ctx, queue); err != nil {
		return err
	}
	g.store.DeleteQueueBodies(ctx, queue)
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
