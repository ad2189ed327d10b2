// Package ops is lmq-gateway's operations side: LMQ's /stats document,
// Prometheus metrics (/metrics), health endpoints (/healthz, /readyz), the
// HTTP access log, the middleware of the HTTP API that has package auth
// authenticate and authorize each request, StatsD output, and the client
// side of the status command.
//
// It sits beside the core: Stats is the core's gateway.Observer and counts
// this gateway's events (pushes, pulls, replies, retention), while queue
// sizes and bytes come from JetStream at the time they are asked for, so that
// several gateways in front of one NATS deployment agree on them.
package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/route"
)

// Options configures Ops. The zero value is usable.
type Options struct {
	// Logger for the access log and errors; slog.Default() when nil.
	Logger *slog.Logger
	// AccessLog logs every HTTP request (method, path, status, bytes,
	// duration) at level info.
	AccessLog bool
	// Auth protects every endpoint but /healthz and /readyz when enabled.
	// With Tokens it is the operator's credential: every right on every
	// queue.
	Auth auth.Credential
	// Tokens, when set, turns token authentication on (package auth):
	// every endpoint but /healthz and /readyz then needs Auth's credential
	// or a token of the store, and /tokens manages them.
	Tokens *auth.Store
	// Version is reported by lmq_build_info.
	Version string
	// Nodes lists NATS servers for /stats (the embedded server's view of its
	// cluster, say); the servers holding the queues' streams are added to
	// them. nil: those alone.
	Nodes func(ctx context.Context) (Nodes, error)
	// StatsTTL is how long one collection of queue sizes from JetStream
	// serves /stats, /metrics and StatsD (default 1s).
	StatsTTL time.Duration
	// MaxQueues bounds the queues covered by /stats and per-queue metrics
	// (default 10000).
	MaxQueues int
	// ReadyTimeout bounds the readiness probe's JetStream round trips
	// (default 2s).
	ReadyTimeout time.Duration
}

// Nodes are LMQ's active_nodes and all_nodes: here the NATS servers.
type Nodes struct {
	Active []string
	All    []string
}

// Ops serves the operations endpoints of one gateway. Create it with New.
type Ops struct {
	core    Core
	stats   *Stats
	opt     Options
	log     *slog.Logger
	inv     *inventory
	metrics *Metrics
	// guard authenticates the requests (Options.Auth and Tokens).
	guard *auth.Guard
	// routes is the table Mount declared this package's routes on, set
	// before serving: Middleware asks it which paths are public.
	routes *route.Table

	draining atomic.Bool

	readyMu sync.Mutex
	readyAt time.Time
	readyOK error
}

// New returns the operations side of core, whose observer is stats.
func New(core Core, stats *Stats, opt Options) *Ops {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.StatsTTL <= 0 {
		opt.StatsTTL = time.Second
	}
	if opt.MaxQueues <= 0 {
		opt.MaxQueues = 10000
	}
	if opt.ReadyTimeout <= 0 {
		opt.ReadyTimeout = 2 * time.Second
	}
	o := &Ops{
		core:  core,
		stats: stats,
		opt:   opt,
		log:   opt.Logger,
		guard: auth.NewGuard(opt.Auth, opt.Tokens),
		inv: &inventory{
			core:      core,
			log:       opt.Logger,
			ttl:       opt.StatsTTL,
			maxQueues: opt.MaxQueues,
		},
	}
	o.metrics = newMetrics(o)
	return o
}

// Stats is the observer the core reports to.
func (o *Ops) Stats() *Stats { return o.stats }

// Metrics is the Prometheus side.
func (o *Ops) Metrics() *Metrics { return o.metrics }

// Drain marks the gateway as shutting down: /readyz answers 503 from now on,
// so that load balancers stop sending new clients.
func (o *Ops) Drain() { o.draining.Store(true) }

// Queues returns the JetStream view of every queue of scope (nil: all),
// cached for StatsTTL.
func (o *Ops) Queues(ctx context.Context, scope gateway.Scope) ([]QueueView, error) {
	views, err := o.collect(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]QueueView, 0, len(views))
	for _, v := range views {
		if scope.Allows(v.Name) {
			out = append(out, v)
		}
	}
	return out, nil
}

// collect is the shared, cached collection of every queue: never cut to
// the scope of the request that happens to start it, which would cut the
// cache to that request's scope for everyone.
func (o *Ops) collect(ctx context.Context) ([]QueueView, error) {
	return o.inv.collect(ctx)
}

// Document builds the /stats document of the queues of scope (nil: all).
func (o *Ops) Document(ctx context.Context, scope gateway.Scope) (*StatsDoc, error) {
	views, err := o.collect(ctx)
	if err != nil {
		return nil, err
	}
	doc := &StatsDoc{Queues: make(map[string]QueueDoc, len(views))}
	for _, v := range views {
		if !scope.Allows(v.Name) {
			continue // a token's request sees the queues of its scope
		}
		doc.Queues[v.Name] = QueueDoc{
			Stats:  o.stats.Queue(v.Name),
			Size:   v.Size,
			Memory: v.Bytes,
			Nodes:  v.Nodes,
			Props:  json.RawMessage(v.Props.JSON()),
		}
	}
	nodes, err := o.nodes(ctx, views)
	if err != nil {
		return nil, err
	}
	doc.ActiveNodes, doc.AllNodes = nodes.Active, nodes.All
	return doc, nil
}

// nodes combines Options.Nodes with the servers the queues' streams report.
// The Nodes function's verdict on a server stands (the embedded server's view
// of its cluster: routes, the meta leader); the streams add the servers it
// does not know (with an external deployment, most of them), current ones as
// active. A server some stream's leader has not heard from for
// gateway.ReplicaSilence, and that no stream reports current, is down
// whatever the function says: those leaders hear from every replica, and
// with an external deployment they are all this gateway can ask.
func (o *Ops) nodes(ctx context.Context, views []QueueView) (Nodes, error) {
	var n Nodes
	if o.opt.Nodes != nil {
		var err error
		if n, err = o.opt.Nodes(ctx); err != nil {
			return Nodes{}, fmt.Errorf("nodes: %w", err)
		}
	}
	judged := make(map[string]bool, len(n.All))
	for _, s := range n.All {
		judged[s] = true
	}
	current, silent := map[string]bool{}, map[string]bool{}
	// The servers holding queues count too: with an external NATS
	// deployment they are most of what this gateway can see of it.
	for _, v := range views {
		n.All = append(n.All, v.Nodes...)
		for _, s := range v.Current {
			current[s] = true
			if !judged[s] {
				n.Active = append(n.Active, s)
			}
		}
		for _, s := range v.Silent {
			silent[s] = true
		}
	}
	n.Active = slices.DeleteFunc(n.Active, func(s string) bool { return silent[s] && !current[s] })
	n.Active, n.All = uniqueSorted(n.Active), uniqueSorted(append(n.All, n.Active...))
	return n, nil
}

func uniqueSorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// StatsDoc is LMQ's /stats document.
type StatsDoc struct {
	ActiveNodes []string            `json:"active_nodes"`
	AllNodes    []string            `json:"all_nodes"`
	Queues      map[string]QueueDoc `json:"queues"`
}

// QueueDoc is one queue in the /stats document.
type QueueDoc struct {
	Stats QueueStats `json:"stats"`
	// Size counts messages waiting and in flight.
	Size uint64 `json:"size"`
	// Memory is the bytes JetStream stores for the queue.
	Memory uint64          `json:"memory"`
	Nodes  []string        `json:"nodes"`
	Props  json.RawMessage `json:"props"`
}

func (o *Ops) serveStats(w http.ResponseWriter, r *http.Request) {
	doc, err := o.Document(r.Context(), auth.ScopeOf(r))
	if err != nil {
		if r.Context().Err() == nil {
			o.log.Warn("stats", "err", err)
			writeJSONError(w, http.StatusServiceUnavailable, err.Error())
		}
		return
	}
	var v any = doc
	if r.URL.Query().Get("stats") == "false" {
		// Beyond LMQ: without each queue's event statistics, a tenth of
		// the bytes with thousands of queues (lmq-gateway status).
		v = doc.brief()
	}
	writeJSON(w, http.StatusOK, v)
}

// briefDoc is StatsDoc without the queues' event statistics.
type briefDoc struct {
	ActiveNodes []string              `json:"active_nodes"`
	AllNodes    []string              `json:"all_nodes"`
	Queues      map[string]briefQueue `json:"queues"`
}

type briefQueue struct {
	Size   uint64          `json:"size"`
	Memory uint64          `json:"memory"`
	Nodes  []string        `json:"nodes"`
	Props  json.RawMessage `json:"props"`
}

func (d *StatsDoc) brief() briefDoc {
	out := briefDoc{ActiveNodes: d.ActiveNodes, AllNodes: d.AllNodes, Queues: make(map[string]briefQueue, len(d.Queues))}
	for name, q := range d.Queues {
		out.Queues[name] = briefQueue{Size: q.Size, Memory: q.Memory, Nodes: q.Nodes, Props: q.Props}
	}
	return out
}

func (o *Ops) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	writePlain(w, http.StatusOK, "ok\n")
}

func (o *Ops) serveReadyz(w http.ResponseWriter, r *http.Request) {
	status, body := http.StatusOK, "ok\n"
	if err := o.Ready(r.Context()); err != nil {
		status, body = http.StatusServiceUnavailable, "not ready: "+err.Error()+"\n"
	}
	if r.URL.Query().Has("verbose") {
		body += o.storeDetail(r) + o.readyDetail(r)
	}
	writePlain(w, status, body)
}

// storeDetail is /readyz?verbose's line on the store: whether it takes
// writes. The cause (a JetStream error) is the API's business, as the
// nodes are.
func (o *Ops) storeDetail(r *http.Request) string {
	err := o.core.Gateway.StoreFailure()
	if err == nil {
		return "store: ok\n"
	}
	line := "store: full: writes refused (pushes answer 503; pulls, acks, deletions and purges are served)"
	if !o.guard.Enabled() || o.guard.Authenticate(r) != nil {
		line += ": " + err.Error()
	}
	return line + "\n"
}

// readyDetail is what /readyz?verbose adds: a line per NATS server saying
// whether it is up, as /stats and the status command see them. The servers'
// names are the API's business: behind its credentials when it has some
// (/readyz itself needs none), and a server that is down does not make this
// gateway unready (the cluster serves while a majority is up).
func (o *Ops) readyDetail(r *http.Request) string {
	if o.guard.Enabled() && o.guard.Authenticate(r) == nil {
		return "nodes: not shown without credentials\n"
	}
	// A recent collection of the queues' views rather than a fresh one:
	// while a stream's leader is gone a collection waits for it (up to
	// seconds), which a readiness probe should not; the servers' own view
	// (Options.Nodes) is current either way.
	views, ok := o.inv.recent(readyViewsAge)
	if !ok {
		var err error
		if views, err = o.collect(r.Context()); err != nil {
			return "nodes: unknown: " + err.Error() + "\n"
		}
	}
	nodes, err := o.nodes(r.Context(), views)
	if err != nil {
		return "nodes: unknown: " + err.Error() + "\n"
	}
	var b strings.Builder
	for _, name := range nodes.All {
		state := "down"
		if slices.Contains(nodes.Active, name) {
			state = "up"
		}
		fmt.Fprintf(&b, "node %s: %s\n", name, state)
	}
	return b.String()
}

func writePlain(w http.ResponseWriter, status int, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(s)))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(s))
}

// Errors of Ready.
var (
	ErrDraining = errors.New("shutting down")
)

const (
	// readyCache is how long a probe's answer is reused: load balancers of
	// many gateways probe often, and each probe writes to JetStream.
	readyCache = time.Second
	// readyViewsAge is how old a collection of queue views /readyz?verbose
	// uses rather than waiting for a new one.
	readyViewsAge = 5 * time.Second
)

// Ready checks that this gateway can serve: it is not shutting down, and
// JetStream answers and stores (a write and a read of this gateway's key in a
// small KV bucket). The probe's answers are reused for a second.
//
// A store that refuses writes for want of storage (JetStream's limit, a
// full disk: the core's StoreFailure) does not make the gateway unready:
// pushes fail on every gateway of that JetStream alike, while this one
// still serves the pulls, acks, deletions and purges that free the space,
// which a load balancer taking it out would cut off. The probe then only
// reads; /readyz?verbose and the lmq_store_failing metric say the store is
// full.
func (o *Ops) Ready(ctx context.Context) error {
	if o.draining.Load() {
		return ErrDraining
	}
	select {
	case <-o.core.Gateway.Closing():
		return ErrDraining
	default:
	}
	o.readyMu.Lock()
	defer o.readyMu.Unlock()
	if !o.readyAt.IsZero() && time.Since(o.readyAt) < readyCache {
		return o.readyOK
	}
	ctx, cancel := context.WithTimeout(ctx, o.opt.ReadyTimeout)
	defer cancel()
	err := o.probe(ctx)
	if ctx.Err() != nil && err != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err // the prober left; do not cache its cancellation
	}
	o.readyAt, o.readyOK = time.Now(), err
	return err
}

func (o *Ops) probe(ctx context.Context) error { return o.core.Gateway.ProbeStore(ctx) }
