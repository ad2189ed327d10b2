// Package console is lmq-gateway's web console: a single-page application
// served at /ui/ from assets embedded in the binary (plain HTML, CSS and
// JavaScript, no build step, nothing fetched from elsewhere), and the small
// JSON API under /ui/api/ that the page needs beyond the LMQ API: a paged,
// sorted and filtered queue list that stays fast with ten thousand queues,
// a queue's detail with where each property comes from and its recent rates,
// a peek at waiting messages, a default-list tester and the cluster view.
// Everything else the page does (edit properties, push, delete, dead
// letters) goes through the ordinary HTTP API, with the same credentials.
//
// The console reads through narrow interfaces: Core (the gateway's
// Inspect and Queues handles and the gateway itself) and Inventory
// (*ops.Ops); it never talks to NATS itself.
package console

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/route"

	"github.com/lmq-gateway/lmq-gateway/internal/lifecycle"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/ops"
)

// Prefix is where the console is served.
const Prefix = "/ui/"

//go:embed assets
var assetsFS embed.FS

// Core is what the console reads of the core, one small interface per
// handle (CoreOf makes it of a *gateway.Gateway).
type Core struct {
	Inspect Inspect
	Queues  Queues
	Gateway Gateway
}

// CoreOf is the Core of gateway g's handles.
func CoreOf(g *gateway.Gateway) Core {
	return Core{Inspect: g.Inspect(), Queues: g.Queues(), Gateway: g}
}

// Inspect is what the console reads of the queues' contents
// (gateway.Inspect); one that is also a waitLister lists the pulls waiting.
type Inspect interface {
	// QueueDetail is a queue's sizes by kind (ErrNotFound when it does not
	// exist).
	QueueDetail(ctx context.Context, queue string) (gateway.QueueDetail, error)
	// Peek returns the next waiting messages without taking them, in the
	// order they will be delivered (highest priority first).
	Peek(ctx context.Context, queue string, n int) ([]gateway.Peeked, error)
	// OldestWaiting is when the oldest waiting message was pushed (zero:
	// none, or unknown).
	OldestWaiting(ctx context.Context, queue string) (time.Time, error)
	// PeekDead returns the oldest dead letters without removing them.
	PeekDead(ctx context.Context, queue string, n int) ([]gateway.Peeked, error)
}

// Queues is what the console reads of the queues' properties
// (gateway.Queues).
type Queues interface {
	// OwnProps are the properties set on the queue itself.
	OwnProps(ctx context.Context, queue string) (mapping.Props, error)
	// DefaultProps is the default-properties list.
	DefaultProps(ctx context.Context) (mapping.DefaultList, error)
}

// Gateway is what the console reads of the gateway itself
// (*gateway.Gateway); one that is also a RatesBus shares the rates.
type Gateway interface {
	// ID names this gateway.
	ID() string
	// Peers are the ids of the other gateways it hears.
	Peers() []string
}

// Inventory is what the console reads of the operations side; *ops.Ops
// implements it.
type Inventory interface {
	// Queues are every queue's sizes and placement, cached briefly.
	// Its routes need admin on every queue (route.OnAll), so it asks for
	// every queue (a nil scope).
	Queues(ctx context.Context, scope gateway.Scope) ([]ops.QueueView, error)
	// Stats are this gateway's per-queue event counters.
	Stats() *ops.Stats
	// Document is the /stats document (for the servers of the cluster).
	Document(ctx context.Context, scope gateway.Scope) (*ops.StatsDoc, error)
	// AuthMode names the configured authentication.
	AuthMode() string
}

var (
	_ Inspect   = (*gateway.Inspect)(nil)
	_ Queues    = (*gateway.Queues)(nil)
	_ Gateway   = (*gateway.Gateway)(nil)
	_ Inventory = (*ops.Ops)(nil)
	_ RatesBus  = (*gateway.Gateway)(nil)
)

// Options configures a Console.
type Options struct {
	// Version is shown on the cluster page.
	Version string
	// PublicShell serves the page itself (HTML, CSS, JavaScript: no data)
	// without credentials, so that a user with a bearer token can open it
	// and type the token in; the page's API always needs the credentials.
	// Without it the page is behind the API's authentication like
	// everything else, which suits basic authentication (the browser asks).
	PublicShell bool
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
	// RPCConns counts the MessagePack-RPC connections open now by the
	// client's IP address (the Clients page); nil: no RPC server.
	RPCConns func() map[string]int
}

// Console serves the web console. Create it with New, add its routes to the
// API's router with Mount, and run its rate sampler with Run.
type Console struct {
	core   Core
	inv    Inventory
	opt    Options
	log    *slog.Logger
	assets map[string]*asset
	rates  *sampler
	// Set by Start, ended by Stop: the sampling and, when the Core is a
	// RatesBus, the subscription to the other gateways' samples.
	sampler *lifecycle.Loop
	unsub   func()
}

// asset is one embedded file, ready to serve plain or gzipped.
type asset struct {
	ctype string
	etag  string
	plain []byte
	gz    []byte
}

// New returns the console of core and inv.
func New(core Core, inv Inventory, opt Options) (*Console, error) {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	c := &Console{
		core:   core,
		inv:    inv,
		opt:    opt,
		log:    opt.Logger,
		assets: map[string]*asset{},
		rates:  newSampler(inv.Stats()),
	}
	c.rates.id = core.Gateway.ID()
	err := fs.WalkDir(assetsFS, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assetsFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		a := &asset{
			ctype: mime.TypeByExtension(path.Ext(p)),
			etag:  `"` + hex.EncodeToString(sum[:8]) + `"`,
			plain: b,
		}
		// Compressed once here: the page is fetched by every browser that
		// opens the console, over links that may be slow.
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		_, _ = zw.Write(b)
		if err := zw.Close(); err != nil {
			return err
		}
		if z.Len() < len(b) {
			a.gz = z.Bytes()
		}
		c.assets[strings.TrimPrefix(p, "assets/")] = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Start samples the per-queue push and pull counters every SampleInterval
// for the rates and charts, on a goroutine of its own until Stop
// (lifecycle.Service).
//
// When the Core's Gateway is a RatesBus, the console also shares the samples with the
// other gateways' consoles, and sums theirs into the cluster's rates; when
// it cannot subscribe, the cluster's rates are off (logged), this
// gateway's still on.
func (c *Console) Start(context.Context) error {
	if bus, ok := c.core.Gateway.(RatesBus); ok {
		stop, err := bus.SubscribeRates(c.rates.heard)
		if err != nil {
			c.log.Warn("console: the cluster's rates are off", "err", err)
		} else {
			c.unsub = stop
			c.rates.mu.Lock()
			c.rates.bus = bus
			c.rates.mu.Unlock()
		}
	}
	c.sampler = lifecycle.NewLoop(c.rates.run)
	return c.sampler.Start(context.Background())
}

// Stop ends the sampling and waits for it, then stops sharing the samples
// (lifecycle.Service).
func (c *Console) Stop() {
	if c.sampler != nil {
		c.sampler.Stop()
	}
	if c.unsub != nil {
		c.unsub()
	}
}

// Mount adds the console's routes to the API's route table (so that they
// pass through its middleware: authentication, metrics, access log). It is
// meant to be called from httpapi.Options.Mount. They need admin on every
// queue: the console shows and changes every queue, and the cluster.
func (c *Console) Mount(t *route.Table) {
	admin := route.OnAll(route.RightAdmin)
	t.Handle(strings.TrimSuffix(Prefix, "/"), admin, http.RedirectHandler(Prefix, http.StatusMovedPermanently), http.MethodGet, http.MethodHead)
	api := Prefix + "api/"
	t.HandleFunc(api+"queues", admin, c.serveQueues, http.MethodGet)
	t.HandleFunc(api+"queue", admin, c.serveQueue, http.MethodGet)
	t.HandleFunc(api+"peek", admin, c.servePeek, http.MethodGet)
	t.HandleFunc(api+"match", admin, c.serveMatch, http.MethodGet, http.MethodPost)
	t.HandleFunc(api+"cluster", admin, c.serveCluster, http.MethodGet)
	t.HandleFunc(api+"rates", admin, c.serveRates, http.MethodGet)
	t.HandleFunc(api+"clients", admin, c.serveClients, http.MethodGet)
	if !c.opt.PublicShell {
		t.HandlePrefix(Prefix, admin, http.HandlerFunc(c.serveAsset), http.MethodGet, http.MethodHead)
	}
}

// Shell serves the page's static files ahead of next (the whole API with
// its authentication) when Options.PublicShell is set; everything else goes
// to next.
func (c *Console) Shell(next http.Handler) http.Handler {
	if !c.opt.PublicShell {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == strings.TrimSuffix(Prefix, "/") && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		// Served before the API's middleware: these files hold no data, so
		// they are neither authenticated nor counted in the access log.
		if strings.HasPrefix(p, Prefix) && !strings.HasPrefix(p, Prefix+"api/") &&
			(r.Method == http.MethodGet || r.Method == http.MethodHead) {
			c.serveAsset(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serveAsset answers /ui/ (the page) and its files.
func (c *Console) serveAsset(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, Prefix)
	if name == "" {
		name = "index.html"
	}
	a, ok := c.assets[name]
	if !ok {
		writeError(w, http.StatusNotFound, "not found")
		return
	}
	h := w.Header()
	securityHeaders(h)
	h.Set("Content-Type", a.ctype)
	h.Set("ETag", a.etag)
	// Revalidated every time: a new binary must not show an old page.
	h.Set("Cache-Control", "no-cache")
	h.Add("Vary", "Accept-Encoding")
	if match := r.Header.Get("If-None-Match"); match != "" && match == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.plain
	if a.gz != nil && acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
		body = a.gz
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// securityHeaders keep the page from being framed or fed other scripts: it
// runs only its own files and talks only to its own origin.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// writeJSON answers v as JSON; the answers are small (a page of rows).
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	// The previews (peek) carry message bodies, a producer's bytes: opened
	// directly in a browser the answer must stay JSON, never a page of the
	// gateway's origin (as pulled bodies, httpapi's bodyHeaders).
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeError answers {"error": msg}, as the API does.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
