// Package kv is the gateway's one type for JetStream Key-Value buckets,
// part of the store seam (package store and its subpackages are the only
// core packages that talk to JetStream). The gateway keeps its small shared
// records (properties, the queue registry, queue metadata, access tokens,
// accumulation windows, the upgrade's lock and jobs, the readiness probe)
// in buckets, one value per key. Every user goes through a *KV, so that how
// a bucket is made, what a conflict or a missing key looks like, and how a
// bucket is watched are decided here, once, and no JetStream type reaches
// the users: entries (Entry) and errors (ErrKeyNotFound, ErrKeyExists,
// ErrRevisionMismatch, ErrNoLeader, ErrBucketNotFound) are this package's
// own.
//
// A bucket is opened with Open on a JetStream handle, or, in the core, with
// store.Store.OpenKV (the store's JetStream) or bus.Bus.OpenKV (a
// connection's, for users that hold no Store).
package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
)

// The outcomes of KV operations that their users tell apart (errors.Is).
// Other failures come as they are: store.Classify turns them into the
// outcomes front ends answer.
var (
	// ErrBucketNotFound: Open with Existing found no bucket.
	ErrBucketNotFound = errors.New("bucket not found")
	// ErrKeyNotFound: the key has no value (never written, deleted or
	// purged).
	ErrKeyNotFound = errors.New("key not found")
	// ErrKeyExists: Create found a value under the key.
	ErrKeyExists = errors.New("key exists")
	// ErrRevisionMismatch: a write conditional on the key's revision
	// (Update, or a removal with LastRevision) found another revision:
	// someone wrote the key since it was read. Nothing was written.
	ErrRevisionMismatch = errors.New("key revision mismatch")
	// ErrNoLeader: nobody answered for the bucket's stream (an election in
	// a cluster, or this gateway's NATS server just went away). Nothing was
	// written; the same request may be sent again.
	ErrNoLeader = errors.New("no leader for the bucket")
)

// CreateMode says what Open does when the bucket does not exist.
type CreateMode uint8

const (
	// Existing opens the bucket only if it exists: ErrBucketNotFound
	// otherwise.
	Existing CreateMode = iota
	// CreateOnce creates the bucket with the config when it does not
	// exist and never changes one that does: a bucket every gateway shares
	// keeps its first creator's replicas, so that a gateway started with
	// another count does not rescale it under the others (an R1 bucket dies
	// with its one server).
	CreateOnce
	// CreateOrUpdate creates the bucket, or brings it to the config.
	CreateOrUpdate
)

// Config says which bucket Open opens, and how it is made. A bucket
// keeps one value per key (no history).
type Config struct {
	Bucket      string
	Description string
	// Replicas of the bucket's stream, when Open creates or updates it.
	Replicas int
	// TTL, when set, is how long a value lives.
	TTL time.Duration
	// MarkerTTL, when set, lets removals leave markers that expire
	// (MarkerTTL the option); it is the longest such marker's life.
	MarkerTTL time.Duration
	Create    CreateMode
}

// KV is one bucket. Open it with Open (or store.Store.OpenKV,
// bus.Bus.OpenKV); it is safe for concurrent use.
type KV struct {
	kv     jetstream.KeyValue
	nc     *nats.Conn
	bucket string
	// prefix is the JetStream API prefix, for Latest's reads from the
	// stream's leader, which nats.go has no call for.
	prefix string
}

// Open opens the bucket cfg.Bucket on js, creating it as cfg.Create says.
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*KV, error) {
	jcfg := jetstream.KeyValueConfig{
		Bucket:         cfg.Bucket,
		Description:    cfg.Description,
		History:        1,
		TTL:            cfg.TTL,
		Replicas:       cfg.Replicas,
		LimitMarkerTTL: cfg.MarkerTTL,
	}
	var kv jetstream.KeyValue
	var err error
	switch cfg.Create {
	case CreateOrUpdate:
		kv, err = js.CreateOrUpdateKeyValue(ctx, jcfg)
	default:
		kv, err = js.KeyValue(ctx, cfg.Bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			if cfg.Create == Existing {
				return nil, fmt.Errorf("bucket %s: %w", cfg.Bucket, ErrBucketNotFound)
			}
			kv, err = js.CreateKeyValue(ctx, jcfg)
			if errors.Is(err, jetstream.ErrBucketExists) {
				kv, err = js.KeyValue(ctx, cfg.Bucket) // another gateway was first
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", cfg.Bucket, err)
	}
	return &KV{kv: kv, nc: js.Conn(), bucket: cfg.Bucket, prefix: jsapi.Prefix(js)}, nil
}

// Bucket is the bucket's name.
func (kv *KV) Bucket() string { return kv.bucket }

// Op is what an entry records.
type Op uint8

const (
	// OpPut: a value.
	OpPut Op = iota
	// OpDelete: the key was deleted (a marker; older revisions stay).
	OpDelete
	// OpPurge: the key was purged (a marker; older revisions are gone), or
	// its value expired.
	OpPurge
)

func (op Op) String() string {
	switch op {
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpPurge:
		return "purge"
	}
	return fmt.Sprintf("Op(%d)", uint8(op))
}

// Entry is one revision of a key: a value (OpPut) or the marker of its
// removal.
type Entry struct {
	Key   string
	Value []byte
	// Revision is the entry's sequence in the bucket's stream: it grows
	// with every write to any key of the bucket.
	Revision uint64
	Op       Op
	Created  time.Time
}

func entryOf(e jetstream.KeyValueEntry) Entry {
	op := OpPut
	switch e.Operation() {
	case jetstream.KeyValueDelete:
		op = OpDelete
	case jetstream.KeyValuePurge:
		op = OpPurge
	}
	return Entry{Key: e.Key(), Value: e.Value(), Revision: e.Revision(), Op: op, Created: e.Created()}
}

// kvErr turns a failed request of the bucket into the package's outcomes
// (ErrKeyNotFound, ErrNoLeader), or returns it as it is. Conflicts are the
// callers' to name (create, conflict).
func (kv *KV) kvErr(key string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("%w: %s %s", ErrKeyNotFound, kv.bucket, key)
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("%w: %w", ErrNoLeader, err)
	}
	return err
}

// wrongLastSeq reports a write refused because the key's revision was not
// the one expected. nats.go says it in several ways: ErrKeyExists (code
// 10071, a single replica), ErrKeyRevisionMismatch (Update and removals),
// or the bare API error (code 10164 on replicated streams).
func wrongLastSeq(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// conflict is a failed conditional write: ErrRevisionMismatch when the key
// was at another revision.
func (kv *KV) conflict(key string, err error) error {
	if err != nil && wrongLastSeq(err) {
		return fmt.Errorf("%w: %w", ErrRevisionMismatch, err)
	}
	return kv.kvErr(key, err)
}

// Get returns the key's value; ErrKeyNotFound when it has none. Any of the
// stream's replicas may answer (buckets allow direct gets), so a write
// acknowledged a moment ago may not be seen yet: Latest sees it.
func (kv *KV) Get(ctx context.Context, key string) (Entry, error) {
	e, err := kv.kv.Get(ctx, key)
	if err != nil {
		return Entry{}, kv.kvErr(key, err)
	}
	return entryOf(e), nil
}

// Create writes the key's first value, or a value over its removal's
// marker, and returns its revision; ErrKeyExists when the key has a value.
func (kv *KV) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := kv.kv.Create(ctx, key, value)
	if err != nil && wrongLastSeq(err) {
		return 0, fmt.Errorf("%w: %w", ErrKeyExists, err)
	}
	return rev, kv.kvErr(key, err)
}

// Update writes the key's value if its latest entry is still at revision
// rev (a value or a removal's marker; 0: the bucket holds nothing of the
// key), and returns the new revision; ErrRevisionMismatch otherwise.
func (kv *KV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	next, err := kv.kv.Update(ctx, key, value, rev)
	return next, kv.conflict(key, err)
}

// Put writes the key's value, whatever it was, and returns its revision.
func (kv *KV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := kv.kv.Put(ctx, key, value)
	return rev, kv.kvErr(key, err)
}

// RemoveOpt is an option of Delete and Purge.
type RemoveOpt func(*removal)

type removal struct {
	rev uint64
	ttl time.Duration
}

// LastRevision makes a removal conditional: it happens only if the key's
// latest entry is at revision rev (ErrRevisionMismatch otherwise). 0: no
// condition.
func LastRevision(rev uint64) RemoveOpt { return func(r *removal) { r.rev = rev } }

// MarkerTTL makes a purge's marker expire after d (the bucket's
// Config.MarkerTTL must be set), rather than stay until the key is
// written again; a delete's marker cannot expire.
func MarkerTTL(d time.Duration) RemoveOpt { return func(r *removal) { r.ttl = d } }

func removeOpts(opts []RemoveOpt) []jetstream.KVDeleteOpt {
	var r removal
	for _, o := range opts {
		o(&r)
	}
	var jopts []jetstream.KVDeleteOpt
	if r.rev != 0 {
		jopts = append(jopts, jetstream.LastRevision(r.rev))
	}
	if r.ttl != 0 {
		jopts = append(jopts, jetstream.PurgeTTL(r.ttl))
	}
	return jopts
}

// Delete removes the key's value with a marker, keeping older revisions.
// Deleting a key without a value is no error (it writes a marker).
func (kv *KV) Delete(ctx context.Context, key string, opts ...RemoveOpt) error {
	return kv.conflict(key, kv.kv.Delete(ctx, key, removeOpts(opts)...))
}

// Purge removes the key's value and every older revision, leaving a
// marker. Purging a key without a value is no error (it writes a marker).
func (kv *KV) Purge(ctx context.Context, key string, opts ...RemoveOpt) error {
	return kv.conflict(key, kv.kv.Purge(ctx, key, removeOpts(opts)...))
}

// Keys lists the keys that hold a value, sorted, among those matching the
// filters (subject wildcards: "j.>"; none: every key); nil when there is
// none. A listing cut short by ctx is an error, not a shorter list.
func (kv *KV) Keys(ctx context.Context, filters ...string) ([]string, error) {
	w, err := kv.watch(ctx, filters, jetstream.IgnoreDeletes(), jetstream.MetaOnly())
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	var keys []string
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("list keys of %s: the watcher closed", kv.bucket)
			}
			if e == nil {
				slices.Sort(keys)
				return slices.Compact(keys), nil
			}
			keys = append(keys, e.Key)
		case <-ctx.Done():
			return nil, fmt.Errorf("list keys of %s: %w", kv.bucket, ctx.Err())
		}
	}
}

// Watcher hands over the entries of a watched bucket (KV.Watch).
type Watcher struct {
	w       jetstream.KeyWatcher
	updates chan *Entry
	stop    chan struct{}
	once    sync.Once
}

// Watch watches the keys matching the filters (subject wildcards; none:
// every key): first the latest entry of each, markers included, then a nil
// entry (the current values are all there), then every later entry as it
// is written. The channel closes when the watch ends: after Stop, or by
// itself (the connection closed); a watcher that ended must be replaced.
// ctx bounds setting the watch up.
func (kv *KV) Watch(ctx context.Context, filters ...string) (*Watcher, error) {
	return kv.watch(ctx, filters)
}

func (kv *KV) watch(ctx context.Context, filters []string, opts ...jetstream.WatchOpt) (*Watcher, error) {
	// nats.go rewrites the filters in place.
	jw, err := kv.kv.WatchFiltered(ctx, slices.Clone(filters), opts...)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", kv.bucket, err)
	}
	w := &Watcher{w: jw, updates: make(chan *Entry), stop: make(chan struct{})}
	go w.pump()
	return w, nil
}

// pump turns nats.go's entries into the package's until nats.go's channel
// closes. After Stop it drains that channel, whose writer would otherwise
// block for good on a full buffer.
func (w *Watcher) pump() {
	defer close(w.updates)
	for je := range w.w.Updates() {
		var e *Entry
		if je != nil {
			ke := entryOf(je)
			e = &ke
		}
		select {
		case w.updates <- e:
		case <-w.stop:
		}
	}
}

// Updates is the channel of entries (Watch).
func (w *Watcher) Updates() <-chan *Entry { return w.updates }

// Stop ends the watch; the channel closes soon after. Safe to call more
// than once.
func (w *Watcher) Stop() {
	w.once.Do(func() {
		close(w.stop)
		_ = w.w.Stop()
	})
}

// Latest returns the key's latest entry as the leader of the bucket's
// stream has it: a value (OpPut) or the marker of its removal (then Op says
// which, and Revision is the marker's); ErrKeyNotFound when the bucket
// holds nothing of the key. Unlike Get, which any replica may answer and
// which can be behind, it sees every write acknowledged before it: what a
// decision made on a revision needs. While no leader answers (an election
// takes about 2 s) the request is repeated with short timeouts until ctx
// ends.
func (kv *KV) Latest(ctx context.Context, key string) (Entry, error) {
	req, err := json.Marshal(map[string]string{"last_by_subj": jsapi.KVSubject(kv.bucket, key)})
	if err != nil {
		return Entry{}, err
	}
	for {
		e, retry, err := kv.latestOnce(ctx, key, req)
		if !retry || ctx.Err() != nil {
			return e, err
		}
		t := time.NewTimer(latestRetryPause)
		select {
		case <-ctx.Done():
			t.Stop()
			return e, err
		case <-t.C:
		}
	}
}

const (
	// latestAttempt bounds one leader read; an election takes about 2 s.
	latestAttempt    = 2 * time.Second
	latestRetryPause = 100 * time.Millisecond
	// kvOpHeader marks a KV delete or purge; markerReasonHeader a marker
	// the server left (an expired value, a removal with a TTL).
	kvOpHeader         = "KV-Operation"
	markerReasonHeader = jetstream.MarkerReasonHeader
)

// msgGetResponse is JetStream's answer to a leader-only message get
// (jsapi.MsgGetSubject).
type msgGetResponse struct {
	Message *struct {
		Seq  uint64    `json:"seq"`
		Hdrs []byte    `json:"hdrs"`
		Data []byte    `json:"data"`
		Time time.Time `json:"time"`
	} `json:"message"`
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// latestOnce is one attempt of Latest; retry says whether another may
// succeed.
func (kv *KV) latestOnce(ctx context.Context, key string, req []byte) (e Entry, retry bool, err error) {
	actx, cancel := context.WithTimeout(ctx, latestAttempt)
	defer cancel()
	msg, err := kv.nc.RequestWithContext(actx, jsapi.MsgGetSubject(kv.prefix, jsapi.KVStream(kv.bucket)), req)
	if err != nil {
		retry = errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders)
		return Entry{}, retry, fmt.Errorf("read %s: %w", key, err)
	}
	var resp msgGetResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return Entry{}, false, fmt.Errorf("read %s: %w", key, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrCode == jsapi.ErrCodeNoMessage {
			return Entry{}, false, fmt.Errorf("%w: %s %s", ErrKeyNotFound, kv.bucket, key)
		}
		// 503: no leader (yet), JetStream not ready.
		return Entry{}, resp.Error.Code == 503, fmt.Errorf("read %s: %s (%d)", key, resp.Error.Description, resp.Error.ErrCode)
	}
	if resp.Message == nil {
		return Entry{}, false, fmt.Errorf("read %s: empty answer", key)
	}
	e = Entry{Key: key, Value: resp.Message.Data, Revision: resp.Message.Seq, Created: resp.Message.Time}
	if len(resp.Message.Hdrs) > 0 {
		hdr, err := nats.DecodeHeadersMsg(resp.Message.Hdrs)
		if err != nil {
			return Entry{}, false, fmt.Errorf("read %s: %w", key, err)
		}
		e.Op = markerOp(hdr.Get(kvOpHeader), hdr.Get(markerReasonHeader))
		if e.Op != OpPut {
			e.Value = nil
		}
	}
	return e, false, nil
}

// markerOp tells a removal's marker by its headers: any KV operation or
// marker reason is one (a value never carries them).
func markerOp(kvOp, reason string) Op {
	switch {
	case kvOp == "DEL", kvOp == "" && reason == "Remove":
		return OpDelete
	case kvOp != "", reason != "":
		return OpPurge
	}
	return OpPut
}
