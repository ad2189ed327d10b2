// Package gateway is the protocol-neutral core of lmq-gateway: push, pull,
// reply, properties, the queue registry, deliveries and stats, on JetStream.
// The three front ends (LMQ's HTTP and MessagePack-RPC APIs, and Amazon
// SQS's) and the web console call it; it knows none of them.
//
// The core decides what to store and when; package store owns how: every
// write of a queue message to JetStream (the health check, the publish and
// its retries, atomic batches), large bodies in the Object Store, reading a
// stored message's content back, the shard streams and the queues'
// consumers (made, updated, deleted; their storage), the pull request wire
// and the look at the shards' subject counts, and the classification of
// each outcome as stored, not stored (ErrUnavailable) or unknown
// (ErrUnknown). Nothing else in the core publishes queue data. The core's
// error sentinels that name a store's outcome are the store's own values.
//
// Layout: queues are subjects, sharded over mapping.ShardCount (64)
// WorkQueue streams LMQS_00..63 (mapping.StreamName): a queue's deliverable
// messages are on lmq.q.<kk>.<enc> in its shard's stream, its parts, delays
// and dead letters on lmq.a/s/d.<kk>.<enc>. A queue exists while its key is
// in the KV bucket LMQ_QUEUES (package registry), which every gateway
// watches; the shard streams are package store's (store/shards.go). A queue
// has a durable pull consumer (store/consumers.go) only while it is in use:
// the first pull makes it (filtered to its subject), JetStream's
// InactiveThreshold removes it after mapping.ConsumerInactive without pulls
// and without deliveries in flight. Properties and the default list live in
// the KV bucket LMQ_PROPS, watched by every gateway (package props). Bodies too large for one
// NATS message live in the Object Store bucket LMQ_OBJ and the queued
// message carries a reference. Queue metadata for front ends that say
// more than LMQ (SQS: times, tags, attributes) lives in the KV bucket
// LMQ_META, read on request (package gateway/meta).
//
// Why (measured, docs/benchmarks-history.md "Many queues: candidate layouts"): a stream and a consumer per
// queue cost ~110 KB each and restart in 144 s at 10,000 queues, and in a
// cluster every stream and consumer is a Raft group. Queues as subjects cost
// ~1 KB at rest (10,000 queues: 33 MiB for the whole process, restart
// 0.04 s), a consumer ~50 KB while in use. One shared stream would do at
// rest, but a WorkQueue ack walks every consumer of its stream, so acks slow
// down with the queues in use: 1,000 consumers on one stream ack at a third
// of today's rate, on 64 shards (~16 each) at least as fast. 256 shards
// cost more streams for nothing. The shard count is fixed (every gateway
// and NATS program must agree where a queue lives); a shard stream is
// created on the first push into it. Raft groups in a cluster thus grow with
// the shards in use (≤ 64) plus the queues in use, not the queues that exist.
// Data of the one-stream-per-queue layout of older versions is moved into
// the shards on first start by package upgrade, which package server runs
// after New and before anything is served (RegisterQueue and MakeShard,
// upgradeapi.go, are what it needs of the core).
//
// Consumer storage: the queues' consumers (and their priority levels')
// keep their state in memory (MemoryStorage), unless Config.FileConsumers
// (--consumer-storage file). With file storage every consumer rewrites its
// own state file after acks: with 1,000 queues in use that took half of the
// process's CPU (BENCHMARKS.md "Many queues"), and pull+ack across them was
// slower than the one-stream-per-queue layout; with memory storage it
// took a third of the CPU per message (~370 instead of ~1,100–1,400 µs,
// embedded NATS included) and ran about three times as fast. The messages are in
// the file-backed WorkQueue stream either way, unacked ones included, so a
// memory consumer loses no message. What a restart of the NATS server loses
// is the consumer's state: the consumer is gone (the next pull request
// finds no responders and consumerMissing makes it again), deliveries in
// flight are handed out again at once, from the oldest, instead of after
// their timeout, and their delivery counts start again, so a delivery in
// flight at a server restart is not counted against the message's retries
// (releases by the gateway are: Lmq-Delivered is in the message). A gateway
// that outlived the restart still holds the first delivery: until the
// consumer is made again its ack answers ErrUnavailable, after that the
// message has gone to the next pull as well (at least once; both acks
// succeed). In a cluster a memory consumer of an R3 stream is still a
// three-node Raft group, its log in memory: it survives the loss of a node
// and loses its state only when its nodes restart together. Nothing else
// relies on a consumer's state surviving. JetStream does not change a
// consumer's storage in place: a consumer found with the other storage
// (older versions, NATS programs, a gateway with the other setting) is used
// as it is until JetStream removes it unused (store's putConsumer).
//
// Deliveries: JetStream accepts acks for stale deliveries (it keys on the
// stream sequence) and redelivers timed-out messages ahead of everything else,
// while LMQ gives each delivery a fresh id, answers 404 to stale ones, and
// serves messages in the order they became available. So the gateway keeps its
// own delivery table (id → stream sequence, ack subject, deadline) with a timer
// per delivery. A nack, an expired timer or a vanished client releases a
// delivery by re-publishing a copy at the tail of the stream (carrying the
// deliveries used so far in Lmq-Delivered, without JetStream's own Nats-*
// headers) and then acking the original away: publish first, so a crash in
// between gives a duplicate, never a loss. The consumer's AckWait is only a
// backstop for a gateway that died, set a margin above the queue's timeout
// (raised with the timeout, never lowered: a lower AckWait would have
// JetStream hand out deliveries still in flight a second time). Retries are
// counted as Lmq-Delivered plus JetStream's delivery count; a message whose
// retries are used up is dropped (or kept as a dead letter, beyond LMQ). A
// delivery id starts with this gateway's id, so a reply reaching another
// gateway is relayed here over NATS (lmq.gw.<id>.reply).
//
// Pulling lives in package dispatch (gateway/dispatch, its package doc
// says how): a client's pull waits on the queue's dispatcher, which issues
// no_wait pull requests and never leaves one standing in JetStream, and
// wakes on notifications (lmq.n.<enc>, published there after every stored
// push or release while other gateways run) or periodic re-polls. Pull and
// PullAny (pull.go) are the API over it: the dispatcher hands over a
// dispatch.Raw, the core makes the delivery; a pulled message no client
// takes comes back through dispatch.Rules (release, discard, drop).
//
// In-flight deliveries keep only the message's headers in memory; a release
// reads the body back from the stream by sequence.
//
// The API is handed out as handles (handles.go): Messages (push, pull,
// reply, visibility), Queues (create, delete, properties, metadata),
// Inspect (sizes, peeks, messages by id, dead letters, deliveries), Parts
// (the accumulator's) and Logs (moving stored messages as they are: the
// accumulator, upgrade and migrate); the Gateway keeps its owner's methods.
//
// Built from: package store (queue data in JetStream: its streams,
// consumers, pull wire and reads, as above; and every KV bucket, kv.KV),
// gateway/registry (which queues
// exist: the mirror of LMQ_QUEUES, MaxQueues, adopting), gateway/dispatch
// (the pull engine: per-queue dispatch state, pull requests, waiting
// clients, priority levels, notifications), gateway/props (the
// properties: their bucket, its mirror, writes and resolution),
// gateway/view (read-only views of stored queues: counts, placement,
// peeks, the oldest dead letter), gateway/waiting (a queue's waiting
// messages by id: listed, deleted, moved), gateway/groups (ordered groups
// moving on), gateway/redrive (a message moved into another queue),
// gateway/release (what becomes of a pulled message no client acked:
// released, moved on, kept as a dead letter or dropped; dead letters
// respawned and deleted),
// gateway/meta (queue metadata, LMQ_META), gateway/leftover (what queues
// deleted while the store was full left), gateway/waits (the waiting
// pulls' bound and list, who a pull is for), gateway/inflight (the
// delivery table and each delivery's states, the deliveries listed across
// the gateways, replies relayed to the gateway holding their delivery, the
// deliveries bound to a connection), gateway/buckets (the shared
// buckets' followers), gateway/pushopt (the push options' one parser),
// gateway/errkind (the one error classification), gateway/qlog (a
// queue's stream below deliveries: entries and the log the accumulator
// and migrate read and trim), gateway/message (the
// message's content, its headers' check, the compound body format, a
// pushed body read against the limits), internal/kvfollow
// (following a KV bucket, skipping echoes of own writes: the registry and
// properties), internal/peers (the other gateways, by heartbeats),
// internal/lifecycle (the services New starts in order and Close stops in
// reverse, and the background work owned and waited for by Close),
// internal/noise (log-noise limiter), internal/recent (recently acked ids)
// and mapping's compound body format.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/buckets"
	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/gateway/groups"
	"github.com/lmq-gateway/lmq-gateway/gateway/inflight"
	"github.com/lmq-gateway/lmq-gateway/gateway/leftover"
	"github.com/lmq-gateway/lmq-gateway/gateway/meta"
	"github.com/lmq-gateway/lmq-gateway/gateway/props"
	"github.com/lmq-gateway/lmq-gateway/gateway/redrive"
	"github.com/lmq-gateway/lmq-gateway/gateway/registry"
	"github.com/lmq-gateway/lmq-gateway/gateway/release"
	"github.com/lmq-gateway/lmq-gateway/gateway/view"
	"github.com/lmq-gateway/lmq-gateway/gateway/waiting"
	"github.com/lmq-gateway/lmq-gateway/gateway/waits"
	"github.com/lmq-gateway/lmq-gateway/internal/lifecycle"
	"github.com/lmq-gateway/lmq-gateway/internal/noise"
	"github.com/lmq-gateway/lmq-gateway/internal/peers"
	"github.com/lmq-gateway/lmq-gateway/internal/recent"
	"github.com/lmq-gateway/lmq-gateway/internal/testsignal"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// Config configures a Gateway.
type Config struct {
	// Replicas of each queue's stream (1 on a single node).
	Replicas int
	// FileConsumers keeps the state of the queues' consumers (deliveries in
	// flight, delivery counts) in files, as older versions did; by default
	// it is kept in memory (see the package doc, "Consumer storage").
	// Consumers that exist already keep the storage they have.
	FileConsumers bool
	// MaxMessageSize is the largest body accepted (default 256 MiB).
	MaxMessageSize int64
	// StoreHealth, when set, reports the NATS server's standing store
	// failure (embedded.Server.StoreError: a full disk), nil when it has
	// none. Meanwhile stores fail at once with ErrUnavailable.
	StoreHealth func() error
	// MaxBufferedBody bounds a body PushStream holds in memory whole, for a
	// queue that accumulates (default 32 MiB); other bodies beyond the NATS
	// payload limit are streamed to the Object Store.
	MaxBufferedBody int64
	// RepollInterval is how often a queue with waiting clients is polled even
	// without a notification (default 2s).
	RepollInterval time.Duration
	// MaxWaitingPulls bounds the pulls (HTTP, RPC and SQS) that may wait for a
	// message at once; beyond it a pull that would wait fails at once with
	// ErrBusy (waitlimit.go). 0: no bound.
	MaxWaitingPulls int
	// MaxQueues bounds the queues that exist, counted in the registry
	// shared by every gateway on the same JetStream (as this gateway's
	// mirror of it sees them): creating one more (a push, a pull, a
	// properties update, a copy) fails with ErrTooManyQueues. Queues that
	// exist already are never refused, nor those found holding messages at
	// the start. Exact on one gateway; gateways creating queues at the same
	// moment may each take the last free place (see registry.Reserve). 0: no
	// bound.
	MaxQueues int
	// Domain is the JetStream domain to use (jetstream.NewWithDomain), for a
	// gateway whose NATS server is not the one running its JetStream, e.g. a
	// leaf node of a hub that does. Empty: the connection's own account's.
	Domain string
	// APIPrefix replaces the JetStream API prefix altogether
	// (jetstream.NewWithAPIPrefix), for a JetStream imported from another
	// account under another prefix. At most one of Domain and APIPrefix.
	APIPrefix string
	// Observer receives events for statistics; nil ignores them.
	Observer Observer
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
}

// core is the state every handle shares (handles.go): the handles embed
// it, so its methods are theirs, unexported.
type core struct {
	bus *bus.Bus
	cfg Config
	log *slog.Logger
	obs Observer
	acc atomic.Pointer[Accumulator]

	// id identifies this gateway instance; it starts every delivery id it
	// hands out so that a reply reaching another gateway can be relayed here.
	id    string
	idPfx []byte
	props *props.Cache
	views *view.Reader // read-only views of stored queues (inventory.go)
	// edits are the edits of queues' waiting messages by id (messages.go).
	edits *waiting.Editor
	// reg is which queues exist (package registry); disp the pull engine
	// and this gateway's per-queue state (package dispatch).
	reg    *registry.Registry
	disp   *dispatch.Dispatcher
	groups *groups.Groups // the ordered groups (package groups)
	mover  *redrive.Mover // moves into other queues (package redrive)
	// rel releases and discards pulled messages (package release).
	rel  *release.Releaser
	dels *inflight.Table
	// store is the one writer (and reader back) of queue data in JetStream.
	store *store.Store
	// acked are the delivery ids acked lately: LMQ answers any reply to a
	// finished delivery with 404, and so does the gateway, but a retried ack
	// whose first try took effect gets ErrAlreadyAcked in the text, which a
	// client can read as done. Kept up to 2^16 ids and 10 minutes; older
	// ones are answered as LMQ would ("not found").
	acked *recent.IDs
	noise *noise.Limiter

	waits *waits.Limiter // the pulls holding a waitSlot (waitlimit.go)

	subs    []*bus.Subscription // the control subjects' (subscribeControl)
	closing chan struct{}
	// followers mirror the buckets of OpenSharedBucket (buckets.go); Close
	// stops them.
	followers *buckets.Followers
	// left is what deleted queues left behind for want of room in the
	// store (package leftover).
	left *leftover.Set
	// meta is the queues' metadata records (package meta, queuemeta.go).
	meta     *meta.Records
	stopWait sync.Once // closes closing (drain.go)
	closeOne sync.Once
	// work counts everything started on the way and holds the context that
	// lives as long as the gateway (lifecycle.Work); Close waits for it.
	work  *lifecycle.Work
	peers *peers.Peers
	// life is the core's services, started by New in order, stopped by
	// Close in reverse (New's list); stopped is set once they stop.
	life    *lifecycle.Group
	stopped atomic.Bool
	// testTimedOut fires when expire is done with a delivery (TestSignals.TimedOut).
	testTimedOut testsignal.Signal[TimedOutDelivery]
}

const (
	controlPrefix = inflight.ControlPrefix
	opTimeout     = 10 * time.Second
)

// New connects the core to JetStream over bus and starts its services in
// order (lifecycle.Group): the properties, the queue registry, the
// dispatcher, the control subscriptions, the peers. ctx bounds the
// start-up. When one fails, those started are stopped again, in reverse.
func New(ctx context.Context, bus *bus.Bus, cfg Config) (*Gateway, error) {
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = 256 << 20
	}
	if cfg.MaxBufferedBody <= 0 {
		cfg.MaxBufferedBody = DefaultMaxBufferedBody
	}
	if cfg.RepollInterval <= 0 {
		cfg.RepollInterval = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	st, err := store.Open(bus, store.Config{
		Replicas:      cfg.Replicas,
		Health:        cfg.StoreHealth,
		Logger:        cfg.Logger,
		FileConsumers: cfg.FileConsumers,
		Domain:        cfg.Domain,
		APIPrefix:     cfg.APIPrefix,
	})
	if err != nil {
		return nil, err
	}
	idb := make([]byte, 4)
	if _, err := rand.Read(idb); err != nil {
		return nil, fmt.Errorf("gateway id: %w", err)
	}
	g := &core{
		bus:     bus,
		store:   st,
		cfg:     cfg,
		log:     cfg.Logger,
		obs:     cfg.Observer,
		id:      hex.EncodeToString(idb),
		idPfx:   idb,
		closing: make(chan struct{}),
		work:    lifecycle.New(closeGrace),
		waits:   waits.New(cfg.MaxWaitingPulls),
	}
	g.followers = buckets.New(g.log)
	if g.obs == nil {
		g.obs = nopObserver{}
	}
	g.dels = inflight.NewTable()
	g.acked = recent.NewIDs(1<<16, 10*time.Minute, nil)
	g.noise = noise.NewLimiter(5*time.Second, nil)
	g.peers = peers.New(bus, idb, g.counted, g.closing)
	g.props = props.New(func(ctx context.Context) (*kv.KV, error) {
		bkt, err := g.openBucket(ctx, mapping.PropsBucket, "lmq-gateway queue properties and default-properties list")
		if err != nil {
			return nil, fmt.Errorf("properties: %w", err)
		}
		return bkt, nil
	}, g.log)
	// The registry's drops end the dispatcher's state of a queue; g.disp
	// is set before the registry starts.
	g.reg = registry.New(registry.Config{
		Store:     g.store,
		Replicas:  cfg.Replicas,
		MaxQueues: cfg.MaxQueues,
		Logger:    g.log,
		OnDrop:    func(queue string) func() { return g.disp.Dropped(queue) },
	})
	g.disp = dispatch.New(dispatch.Config{
		Bus:            bus,
		Store:          g.store,
		Props:          g.props,
		Registry:       g.reg,
		Work:           g.work,
		Closing:        g.closing,
		Wrap:           g.counted,
		Peers:          g.peers,
		Logger:         g.log,
		Noise:          g.noise,
		ID:             idb,
		RepollInterval: cfg.RepollInterval,
		Rules: dispatch.Rules{
			// (g.rel is made below, after the groups and the mover.)
			Release: func(r *dispatch.Raw) { g.rel.Release(r, false) },
			Discard: func(r *dispatch.Raw) { g.rel.Discard(r) },
			Drop:    func(r *dispatch.Raw) { g.rel.Drop(r) },
			Groups:  func(queue string) bool { return g.groups.Sweep(queue) },
		},
	})
	g.props.OnChange(g.disp.PropsChanged)
	g.groups = newGroups(g)
	g.mover = newRedrive(g)
	g.rel = release.New(release.Config{
		Store:     g.store,
		Disp:      g.disp,
		Props:     g.props,
		Groups:    g.groups,
		Mover:     g.mover,
		Obs:       g.obs,
		OpContext: g.opContext,
		OpTimeout: opTimeout,
		Logger:    g.log,
	})
	g.meta = meta.New(meta.Config{
		Store:   g.store,
		Create:  g.openBucket,
		KeyGone: g.reg.KeyGone,
		Logger:  g.log,
		Noise:   g.noise,
	})
	g.left = leftover.New(leftover.Config{
		Spawn:     g.spawn,
		Known:     g.reg.Known,
		DropProps: g.dropOwnProps,
		DropMeta:  g.meta.Drop,
		Timeout:   opTimeout,
		Logger:    g.log,
	})
	g.views = newViews(g)
	g.edits = newWaiting(g)

	// The services, in start order; Close stops them in reverse, and so
	// does a failed start (lifecycle.Group): each one's Stop may rely on
	// everything before it still running.
	g.life = lifecycle.NewGroup(
		// Last to stop: the delivery timers, then the work owner, once
		// nothing else can start work (every subscription is gone).
		lifecycle.Func(nil, func() {
			g.dels.StopTimers()
			g.work.Close()
		}),
		// The buckets opened later by OpenSharedBucket (auth's tokens).
		lifecycle.Func(nil, g.followers.Stop),
		g.props,
		g.reg,
		g.disp,
		// Replies relayed from other gateways, and their questions about
		// this one's deliveries.
		lifecycle.Func(g.subscribeControl, g.unsubscribeControl),
		g.peers,
		// Pull requests in flight when the connection dropped get no
		// answer: chained onto the connection's own handler (the daemon
		// logs there); off once the core stops.
		lifecycle.Func(func(context.Context) error {
			bus.OnReconnect(func() {
				if g.stopped.Load() {
					return
				}
				select {
				case <-g.closing:
				default:
					_ = g.peers.Announce()
					g.disp.OnReconnect()
				}
			})
			return nil
		}, func() { g.stopped.Store(true) }),
		// Every subscription above is known to the server before New
		// returns. FlushWithContext insists on a deadline; the caller's
		// ctx need not have one, or may have used up the one it has.
		lifecycle.Func(func(ctx context.Context) error {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
			defer cancel()
			if err := bus.Flush(fctx); err != nil {
				return fmt.Errorf("flush: %w", err)
			}
			return nil
		}, nil),
	)
	if err := g.life.Start(ctx); err != nil {
		return nil, err
	}
	return newGateway(g), nil
}

// subscribeControl subscribes to this gateway's control subjects: replies
// relayed from other gateways, and their questions about its deliveries.
func (g *core) subscribeControl(context.Context) error {
	for _, c := range []struct {
		subj string
		h    bus.Handler
	}{
		{controlPrefix + g.id + ".reply", g.onRelayedReply},
		{controlPrefix + g.id + ".deliveries", g.onDeliveriesRequest},
	} {
		sub, err := g.bus.Subscribe(c.subj, g.counted(c.h))
		if err != nil {
			g.unsubscribeControl()
			return fmt.Errorf("subscribe control: %w", err)
		}
		g.subs = append(g.subs, sub)
	}
	return nil
}

func (g *core) unsubscribeControl() {
	for _, s := range g.subs {
		_ = s.Unsubscribe()
	}
	g.subs = nil
}

// SetAccumulator installs the handler of pushes to accumulating queues (it is
// built on the core, so it comes after New). Until then such pushes fail.
func (g *Gateway) SetAccumulator(a Accumulator) { g.acc.Store(&a) }

// ID is this gateway instance's id (hex), the prefix of its delivery ids.
func (g *Gateway) ID() string { return g.id }

// Peers is the ids of the other gateways this one knows to share its NATS
// system (their hellos, or their notifications, were heard within the last
// 15 s).
func (g *Gateway) Peers() []string { return g.peers.List() }

// Close stops the core: waiting pulls answer empty; in-flight deliveries stay
// pending in JetStream and come back after the consumer's AckWait. It
// returns when none of the core's goroutines is left (background work under
// way may take up to closeGrace), so the caller may close NATS next.
func (g *Gateway) Close() {
	g.closeOne.Do(func() {
		g.StopWaiting()
		g.life.Stop()
	})
}

// Closing is closed when StopWaiting or Close starts: a shutdown is under way.
func (g *Gateway) Closing() <-chan struct{} { return g.closing }

// jsErr classifies JetStream/NATS failures for front ends (store.Classify).
func jsErr(op string, err error) error { return store.Classify(op, err) }
