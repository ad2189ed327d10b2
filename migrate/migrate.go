// Package migrate copies a running LMQ into lmq-gateway's JetStream: the
// default-properties list, every queue's properties, and every waiting
// message with its metadata. It is the engine of `lmq-gateway migrate`.
//
// The migrator speaks to the old LMQ over its HTTP API only (it is the one
// interface every LMQ version has) and to the target through a gateway core
// of its own on the target's NATS (gateway.New; several cores share one NATS,
// so the gateway keeps serving while the migration runs).
//
// Safety: a message is pulled from LMQ (GET /messages/:name?t=0), stored in
// JetStream, and only then acked on LMQ. Whatever is killed at whatever
// moment, a message is either still on LMQ (its delivery times out and it
// comes back) or already in the gateway: nothing is lost, and re-running
// finishes the job. The price is a possible duplicate for a message stored
// but not yet acked when the migrator died; the journal (mapping.JournalStream)
// bounds and reports those. Before acking, the migrator notes the message's
// delivery id and a digest of its content there; a re-run first acks those
// ids on LMQ (if LMQ still holds the delivery, there is no duplicate at all),
// and recognises by digest the ones LMQ delivers again, which it counts as
// duplicates. It stores them anyway: two messages with equal content are
// indistinguishable, and dropping one that only looked like a duplicate would
// lose it.
//
// Messages are stored as they were on LMQ, bypassing the target queue's
// accumulation (a message waiting in LMQ was already accumulated, or was
// never meant to be), with retry set to what LMQ reported as remaining, so
// that the gateway's first delivery says the same x-lmq-retry-remaining LMQ
// would have. Compound messages keep their parts and each part's metadata.
// Properties are copied before the messages, with the real values: pushes of
// clients already pointed at the gateway are handled by its rules meanwhile,
// and the copy joins them.
package migrate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/natsconn"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
	"github.com/lmq-gateway/lmq-gateway/upgrade"
)

// Options configure a migration. From is required.
type Options struct {
	// From is the base URL of the old LMQ's HTTP API, "http://old-lmq:9980".
	From string
	// ToNATS is the target gateway's NATS (its --nats-listen or --nats-url);
	// default nats://127.0.0.1:4222. Ignored when NATS is set.
	ToNATS string
	// ToNATSAuth are the credentials and TLS settings for ToNATS, as the
	// gateway's for its --nats-url (its URLs, Name and Logger are ignored).
	ToNATSAuth natsconn.Options
	// NATS is an open connection to the target's NATS, used instead of
	// dialling ToNATS; it is not closed.
	NATS *nats.Conn
	// Queues selects the queues to copy by name (unanchored); nil: all.
	Queues *regexp.Regexp
	// Names lists the queues when the source cannot (no GET /stats); nil:
	// ask GET /stats.
	Names []string
	// DryRun lists what would move and changes nothing anywhere.
	DryRun bool
	// Parallel is how many queues are copied at once (default 4). Within a
	// queue messages are copied one by one, so their order is kept.
	Parallel int
	// Linger is how long a queue that looks empty is still watched when LMQ
	// says it holds messages (delivered to a client that has not answered, or
	// in an open accumulation window): default 10s. What is left after that
	// is reported; a re-run picks it up.
	Linger time.Duration
	// RetryFor is how long an unreachable source or target is retried before
	// the migration gives up (default 1m): either side may restart meanwhile.
	RetryFor time.Duration
	// MinSourceTimeout: a queue whose timeout on LMQ is shorter is given this
	// timeout on LMQ while it is copied (and its own value back afterwards),
	// so that acks arrive before LMQ hands the message out again; timeout 0
	// would otherwise copy every message retry+1 times. Default 10s; negative
	// never touches the source's properties.
	MinSourceTimeout time.Duration
	// Replicas of the streams and of the journal bucket created on the
	// target (as the gateway's --replicas); default 1.
	Replicas int
	// Progress is how often per-queue progress is written (default 2s;
	// negative: only start, end and summary lines).
	Progress time.Duration
	// HTTPClient talks to the source; default: a client without proxy.
	HTTPClient *http.Client
	// Logger receives warnings; slog.Default() when nil.
	Logger *slog.Logger

	// beforeAck, when set (tests), runs after a message is stored and
	// journaled and before it is acked on the source; an error ends the
	// run there, as if the migrator had been killed.
	beforeAck func(queue string) error
}

func (o *Options) normalize() error {
	if o.From == "" {
		return errors.New("the source is required (--from http://old-lmq:9980)")
	}
	u, err := url.Parse(o.From)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("source %q: want an http:// URL", o.From)
	}
	o.From = strings.TrimRight(o.From, "/")
	if o.ToNATS == "" {
		o.ToNATS = "nats://127.0.0.1:4222"
	}
	// Checked before the source is asked anything: a bad setting should not
	// wait for the listing of a large LMQ.
	no := o.ToNATSAuth
	no.URLs = o.ToNATS
	if err := no.Validate(); err != nil && o.NATS == nil {
		return fmt.Errorf("--to-nats: %w", err)
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.Linger <= 0 {
		o.Linger = 10 * time.Second
	}
	if o.RetryFor <= 0 {
		o.RetryFor = time.Minute
	}
	if o.MinSourceTimeout == 0 {
		o.MinSourceTimeout = 10 * time.Second
	}
	if o.Replicas < 0 || o.Replicas > 5 {
		return fmt.Errorf("--replicas %d: want 1 to 5 (JetStream's limit; as the gateway's --replicas)", o.Replicas)
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Progress == 0 {
		o.Progress = 2 * time.Second
	}
	if o.HTTPClient == nil {
		// No overall timeout: each request has its own (long-polls are longer).
		o.HTTPClient = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 16}}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Report is the outcome of a migration run.
type Report struct {
	From   string
	DryRun bool
	// DefaultEntries is the length of the default list copied (or to copy);
	// SkippedEntries were invalid on the target (a regexp Go cannot compile).
	DefaultEntries, SkippedEntries int
	// Queues are the selected queues, by name.
	Queues []QueueReport
	// Messages copied (in a dry run: waiting), Compound of them, Bytes of content.
	Messages, Compound, Bytes int64
	// Resolved are messages left stored-but-unacked by an interrupted run
	// whose LMQ delivery was still valid: acked now, no duplicate.
	Resolved int
	// Duplicates are messages LMQ delivered again after their copy had been
	// stored (an interruption between store and ack): they are in the gateway
	// twice.
	Duplicates int64
	// Unconfirmed are messages stored but not acked on LMQ that LMQ did not
	// deliver again before the end: it discarded them (no retries left) or
	// another LMQ client took them, which makes them duplicates there.
	Unconfirmed int64
	// SourceInterruptions counts the times LMQ stopped answering and came back.
	SourceInterruptions int
	// LeftOnSource are messages still on LMQ at the end (in flight to its
	// clients, or in an open window); a re-run copies them.
	LeftOnSource int64
	// Failed lists queues that could not be finished.
	Failed  []string
	Elapsed time.Duration
}

// QueueReport is one queue's part of a Report.
type QueueReport struct {
	Name string
	// Props are the effective properties on LMQ (as copied).
	Props mapping.Effective
	// Waiting is LMQ's size when the migration started.
	Waiting                       int64
	Copied, Compound, Bytes       int64
	Duplicates, Unconfirmed, Left int64
	Elapsed                       time.Duration
	Err                           error
}

// Run migrates and writes progress and a summary to out.
func Run(ctx context.Context, opts Options, out io.Writer) error {
	_, err := Migrate(ctx, opts, out)
	return err
}

// migration is one run.
type migration struct {
	o    Options
	src  *source
	core *gateway.Gateway
	j    *journal
	p    *printer
	log  *slog.Logger

	mu      sync.Mutex
	suspect map[string][]*flight // by queue: stored, ack unconfirmed
}

// Migrate runs a migration and returns its report, which is also written to
// out. An interrupted run (ctx ended) returns its partial report and ctx's error.
func Migrate(ctx context.Context, opts Options, out io.Writer) (*Report, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	m := &migration{
		o: opts,
		src: &source{
			base:  opts.From,
			hc:    opts.HTTPClient,
			retry: opts.RetryFor,
			log:   opts.Logger,
		},
		p:       newPrinter(out),
		log:     opts.Logger,
		suspect: map[string][]*flight{},
	}
	rep := &Report{From: opts.From, DryRun: opts.DryRun}
	start := time.Now()
	defer func() { rep.Elapsed = time.Since(start) }()

	queues, err := m.listQueues(ctx)
	if err != nil {
		return nil, err
	}
	listText, err := m.src.defaultList(ctx)
	if err != nil {
		return nil, fmt.Errorf("default properties: %w", err)
	}
	list, skipped := parseDefaultsLenient(listText)
	rep.DefaultEntries, rep.SkippedEntries = len(list), len(skipped)
	for _, s := range skipped {
		m.p.printf("default properties: entry %s skipped: %v", s.text, s.err)
	}
	if opts.DryRun {
		return rep, m.dryRun(ctx, rep, list, queues)
	}

	nc := opts.NATS
	if nc == nil {
		no := opts.ToNATSAuth
		no.URLs, no.Name, no.Logger = opts.ToNATS, "lmq-gateway migrate", opts.Logger
		nopts, err := no.NATSOptions()
		if err != nil {
			return nil, fmt.Errorf("--to-nats: %w", err)
		}
		// One attempt: the target is the gateway the operator just started;
		// a refusal is a wrong URL or credentials, not worth a minute's wait.
		nc, err = nats.Connect(strings.Join(no.Servers(), ","), nopts...)
		if err != nil {
			return nil, fmt.Errorf("connect to the target's NATS %s: %w", redactedURLs(opts.ToNATS), err)
		}
		defer nc.Close()
	}
	// Start-up is bounded: an unreachable target must not hang the command.
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	bus := bus.New(nc)
	m.core, err = gateway.New(sctx, bus, gateway.Config{Replicas: opts.Replicas, Domain: opts.ToNATSAuth.Domain, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("gateway core on %s: %w", nc.ConnectedUrlRedacted(), err)
	}
	defer m.core.Close()
	// Queues of the one-stream-per-queue layout (a target of an older
	// version not yet restarted) move into the shards before anything is
	// stored, as a gateway's start does; at once when there are none.
	if err := upgrade.Run(sctx, upgrade.Deps{NATS: bus, Core: upgrade.Core{Gateway: m.core, Logs: m.core.Logs()}, Domain: opts.ToNATSAuth.Domain, Logger: opts.Logger}); err != nil {
		return nil, fmt.Errorf("layout upgrade on %s: %w", nc.ConnectedUrlRedacted(), err)
	}
	// The journal is the migrator's own stream, beside the queues the core
	// stores into.
	js, err := jsapi.New(nc, opts.ToNATSAuth.Domain, "")
	if err != nil {
		return nil, err
	}
	if m.j, err = openJournal(sctx, js, opts.From, opts.Replicas); err != nil {
		return nil, err
	}
	scancel()
	m.p.printf("migrating %s → %s: %d queues, %d messages waiting", opts.From, nc.ConnectedUrlRedacted(), len(queues), totalSize(queues))

	if had, err := m.core.Queues().DefaultProps(ctx); err == nil && len(had) > 0 && !bytes.Equal(had.JSON(), list.JSON()) {
		m.p.printf("default properties: replacing the gateway's list %s", had.JSON())
	}
	if err := m.core.Queues().SetDefaultProps(ctx, list); err != nil {
		return nil, fmt.Errorf("default properties: %w", err)
	}
	m.p.printf("default properties: %d entries copied %s", len(list), list.JSON())
	if rep.Resolved, err = m.resolveEarlier(ctx); err != nil {
		return nil, err
	}

	runs := make([]*queueRun, len(queues))
	for i, q := range queues {
		runs[i] = &queueRun{name: q.name, waiting: q.size}
	}
	m.copyAll(ctx, runs)

	for _, r := range runs {
		qr := r.report()
		rep.Queues = append(rep.Queues, qr)
		rep.Messages += qr.Copied
		rep.Compound += qr.Compound
		rep.Bytes += qr.Bytes
		rep.Duplicates += qr.Duplicates
		rep.Unconfirmed += qr.Unconfirmed
		rep.LeftOnSource += qr.Left
		if qr.Err != nil {
			rep.Failed = append(rep.Failed, qr.Name)
		}
	}
	rep.SourceInterruptions = m.src.interruptions()
	rep.Elapsed = time.Since(start)
	rep.write(m.p)
	switch {
	case ctx.Err() != nil:
		return rep, fmt.Errorf("migration interrupted (run it again to finish): %w", ctx.Err())
	case len(rep.Failed) > 0:
		return rep, fmt.Errorf("%d queues not finished (%s); run it again to finish", len(rep.Failed), strings.Join(quoteAll(rep.Failed), ", "))
	}
	return rep, nil
}

type sourceQueue struct {
	name string
	size int64
}

func totalSize(qs []sourceQueue) int64 {
	var n int64
	for _, q := range qs {
		n += max(q.size, 0)
	}
	return n
}

// listQueues returns the selected queues, sorted, with their sizes.
func (m *migration) listQueues(ctx context.Context) ([]sourceQueue, error) {
	sizes, err := m.src.queueSizes(ctx)
	if err != nil {
		if m.o.Names == nil {
			return nil, fmt.Errorf("list queues (GET /stats): %w", err)
		}
		sizes = map[string]int64{}
		m.log.Warn("GET /stats failed; queue sizes unknown", "err", err)
	}
	names := slices.Collect(maps.Keys(sizes))
	if m.o.Names != nil {
		names = m.o.Names
	}
	var out []sourceQueue
	for _, name := range names {
		if m.o.Queues != nil && !m.o.Queues.MatchString(name) {
			continue
		}
		if err := mapping.ValidateQueueName(name); err != nil {
			m.p.printf("queue %q skipped: %v", name, err)
			continue
		}
		size, ok := sizes[name]
		if !ok {
			size = -1
		}
		out = append(out, sourceQueue{name: name, size: size})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].name < out[b].name })
	return out, nil
}

type skippedEntry struct {
	text string
	err  error
}

// parseDefaultsLenient parses LMQ's default list. LMQ's regexps are PCRE; an
// entry Go's RE2 cannot compile (a lookahead, a backreference) is skipped and
// reported rather than failing the migration: the queues that exist get
// their effective properties copied anyway, so only queues created later
// would miss it.
func parseDefaultsLenient(text []byte) (mapping.DefaultList, []skippedEntry) {
	if l, err := mapping.ParseDefaultList(text); err == nil {
		return l, nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(text, &raw); err != nil {
		return nil, []skippedEntry{{text: string(text), err: err}}
	}
	var out mapping.DefaultList
	var skipped []skippedEntry
	for _, e := range raw {
		l, err := mapping.ParseDefaultList([]byte("[" + string(e) + "]"))
		if err != nil {
			skipped = append(skipped, skippedEntry{text: string(e), err: err})
			continue
		}
		out = append(out, l...)
	}
	return out, skipped
}

func (m *migration) dryRun(ctx context.Context, rep *Report, list mapping.DefaultList, queues []sourceQueue) error {
	m.p.printf("dry run from %s: nothing is changed", m.o.From)
	m.p.printf("default properties: %d entries %s", len(list), list.JSON())
	for _, q := range queues {
		props, err := m.src.props(ctx, q.name)
		if err != nil {
			return fmt.Errorf("queue %q: %w", q.name, err)
		}
		rep.Queues = append(rep.Queues, QueueReport{Name: q.name, Props: props, Waiting: q.size})
		rep.Messages += max(q.size, 0)
		m.p.printf("queue %q: %s messages, properties %s, stream %s", q.name, count(q.size), props.JSON(), mapping.StreamName(q.name))
	}
	m.p.printf("would copy %d queues, %d messages, and the default list", len(queues), rep.Messages)
	return nil
}

func count(n int64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprint(n)
}

// resolveEarlier settles the messages an interrupted run was storing. One
// whose copy is not in the gateway was never stored: LMQ delivers it again
// and it is copied as usual. One whose copy is there is acked now with its
// old delivery id: LMQ answers 204 while it still holds that delivery (no
// duplicate), 404 once the delivery timed out and the message went back to
// the queue; the copy this run pulls then is a duplicate, recognised by its
// digest. When the search is cut short, the message is treated as stored but
// not acked: a duplicate at worst, never a loss.
func (m *migration) resolveEarlier(ctx context.Context) (int, error) {
	fl, err := m.j.flights(ctx)
	if err != nil {
		return 0, err
	}
	resolved, unstored, pending := 0, 0, 0
	for _, f := range fl {
		_, stored, err := m.findCopy(ctx, f.Queue, f.ID, f.After)
		if err != nil {
			m.log.Warn("could not tell whether a message of an earlier run was stored; counting it as a possible duplicate", "queue", f.Queue, "err", err)
			m.addSuspect(f)
			pending++
			continue
		}
		if !stored {
			unstored++
			if err := m.j.dropFlight(ctx, f); err != nil {
				return resolved, err
			}
			continue
		}
		err = m.src.ack(ctx, f.Queue, f.ID)
		switch {
		case err == nil:
			resolved++
			if err := m.j.dropFlight(ctx, f); err != nil {
				return resolved, err
			}
		case errors.Is(err, errGone):
			m.addSuspect(f)
			pending++
		default:
			return resolved, fmt.Errorf("settle a message of an earlier run in %q: %w", f.Queue, err)
		}
	}
	if len(fl) > 0 {
		m.p.printf("earlier interrupted run: %d messages were in hand: %d not stored (copied again now), %d stored and acked now, %d stored and not acked (duplicates if the source delivers them again)",
			len(fl), unstored, resolved, pending)
	}
	return resolved, nil
}

func (m *migration) addSuspect(f *flight) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.suspect[f.Queue] = append(m.suspect[f.Queue], f)
}

// matchSuspect finds and removes the flight a pulled message is a second
// delivery of: same queue and content, no more retries left than before.
func (m *migration) matchSuspect(queue, digest string, retry int) *flight {
	m.mu.Lock()
	defer m.mu.Unlock()
	fs := m.suspect[queue]
	for i, f := range fs {
		if f.Sum == digest && (retry < 0 || retry <= f.Retry) {
			m.suspect[queue] = slices.Delete(fs, i, i+1)
			return f
		}
	}
	return nil
}

// takeSuspects removes and returns the queue's unmatched flights.
func (m *migration) takeSuspects(queue string) []*flight {
	m.mu.Lock()
	defer m.mu.Unlock()
	fs := m.suspect[queue]
	delete(m.suspect, queue)
	return fs
}

// queueRun is the progress of one queue, read by the progress printer.
type queueRun struct {
	name    string
	waiting int64
	props   mapping.Effective

	copied, compound, bytes atomic.Int64
	dups, unconfirmed       atomic.Int64
	remaining               atomic.Int64 // LMQ's size, as last seen
	started, ended          atomic.Int64 // Unix ns; 0 = not yet
	lastSeq                 uint64       // stream sequence of the last copy stored (or the stream's end at the start)
	lastCopied              int64        // printer's previous sample
	left                    int64
	err                     error
}

func (r *queueRun) report() QueueReport {
	qr := QueueReport{
		Name: r.name, Props: r.props, Waiting: r.waiting,
		Copied: r.copied.Load(), Compound: r.compound.Load(), Bytes: r.bytes.Load(),
		Duplicates: r.dups.Load(), Unconfirmed: r.unconfirmed.Load(), Left: r.left, Err: r.err,
	}
	if s, e := r.started.Load(), r.ended.Load(); s != 0 && e != 0 {
		qr.Elapsed = time.Duration(e - s)
	}
	return qr
}

// copyAll copies the queues, Parallel at a time, printing progress.
func (m *migration) copyAll(ctx context.Context, runs []*queueRun) {
	work := make(chan *queueRun)
	var wg sync.WaitGroup
	for range min(m.o.Parallel, max(len(runs), 1)) {
		wg.Go(func() {
			for r := range work {
				r.started.Store(time.Now().UnixNano())
				r.err = m.copyQueue(ctx, r)
				r.ended.Store(time.Now().UnixNano())
				m.printDone(r)
			}
		})
	}
	stop := make(chan struct{})
	var pwg sync.WaitGroup
	if m.o.Progress > 0 {
		pwg.Go(func() { m.progress(ctx, runs, stop) })
	}
	for _, r := range runs {
		if ctx.Err() != nil {
			r.err = ctx.Err()
			continue
		}
		select {
		case work <- r:
		case <-ctx.Done():
			r.err = ctx.Err()
		}
	}
	close(work)
	wg.Wait()
	close(stop)
	pwg.Wait()
}

// copyQueue copies one queue: properties, then messages until LMQ has none.
func (m *migration) copyQueue(ctx context.Context, r *queueRun) error {
	rec, err := m.j.queue(ctx, r.name)
	if err != nil {
		return err
	}
	if rec == nil {
		props, err := m.src.props(ctx, r.name)
		if err != nil {
			return err
		}
		rec = &queueRecord{Queue: r.name, Props: props.JSON(), Started: time.Now()}
		// Written before anything changes, so that a re-run knows the
		// queue's own properties even if this run dies with LMQ's timeout raised.
		if err := m.j.putQueue(ctx, *rec); err != nil {
			return err
		}
	}
	p, err := mapping.ParseProps(rec.Props)
	if err != nil {
		return fmt.Errorf("journal properties of %q: %w", r.name, err)
	}
	r.props = mapping.Resolve(nil, r.name, p)
	if err := m.applyProps(ctx, r.name, r.props); err != nil {
		return fmt.Errorf("properties of %q: %w", r.name, err)
	}
	// A queue LMQ lists as empty is left alone: there is nothing to ack.
	if floor := m.o.MinSourceTimeout; floor > 0 && r.props.TimeoutDuration() < floor && r.waiting != 0 {
		// Noted first, so that whoever finishes the queue puts it back even
		// if this run dies right after the change. Raised on every run: the
		// note does not prove that the change went through.
		if !rec.TimeoutRaised {
			rec.TimeoutRaised = true
			if err := m.j.putQueue(ctx, *rec); err != nil {
				return err
			}
		}
		if err := m.src.setTimeout(ctx, r.name, floor.Seconds()); err != nil {
			return fmt.Errorf("raise the timeout of %q on the source: %w", r.name, err)
		}
		m.p.printf("queue %q: timeout on the source raised from %gs to %gs while copying", r.name, r.props.Timeout, floor.Seconds())
	}
	r.remaining.Store(r.waiting)
	// Where this run's copies start: an interrupted run's entries say where
	// to look for the copy they were storing.
	st, err := m.core.Logs().QueueLog(ctx, r.name)
	if err != nil {
		return fmt.Errorf("queue %q on the target: %w", r.name, err)
	}
	r.lastSeq = st.LastSeq()

	if err := m.copyMessages(ctx, r); err != nil {
		return err
	}

	// Done: LMQ's timeout back, the journal entries of this queue gone.
	if rec.TimeoutRaised {
		if err := m.src.setTimeout(ctx, r.name, r.props.Timeout); err != nil {
			return fmt.Errorf("restore the timeout of %q on the source: %w", r.name, err)
		}
	}
	if r.left == 0 {
		// LMQ holds nothing of this queue any more, so it cannot deliver
		// those messages again.
		for _, f := range m.takeSuspects(r.name) {
			r.unconfirmed.Add(1)
			if err := m.j.dropFlight(ctx, f); err != nil {
				return err
			}
		}
	}
	return m.j.dropQueue(ctx, r.name)
}

// applyProps gives the target queue the effective properties it had on LMQ,
// creating it. Only the keys that differ from what the (copied) default list
// gives are stored as the queue's own: a queue that followed LMQ's defaults
// keeps following them.
func (m *migration) applyProps(ctx context.Context, queue string, want mapping.Effective) error {
	defaults, err := m.core.Queues().DefaultProps(ctx)
	if err != nil {
		return err
	}
	base := mapping.Resolve(defaults, queue, mapping.Props{})
	own, err := propsDiff(want, base)
	if err != nil {
		return err
	}
	if err := m.core.Queues().UpdateProps(ctx, queue, own); err != nil {
		return err
	}
	got, err := m.core.Queues().QueueProps(ctx, queue)
	if err != nil {
		return err
	}
	if bytes.Equal(got.JSON(), want.JSON()) {
		return nil
	}
	// Own properties already on the target (an earlier run, a client)
	// override the defaults: state every key.
	full, err := mapping.ParseProps(want.JSON())
	if err != nil {
		return err
	}
	full = full.Merge(mapping.Props{Hooks: nonNilHooks(want.Hooks)})
	if err := m.core.Queues().UpdateProps(ctx, queue, full); err != nil {
		return err
	}
	if got, err = m.core.Queues().QueueProps(ctx, queue); err == nil && !bytes.Equal(got.JSON(), want.JSON()) {
		return fmt.Errorf("properties are %s on the target, want %s", got.JSON(), want.JSON())
	}
	return err
}

func nonNilHooks(h mapping.Hooks) mapping.Hooks {
	if h == nil {
		return mapping.Hooks{}
	}
	return h
}

// propsDiff returns the properties that turn base into want, key by key on
// their JSON form, so that it covers whatever keys mapping knows.
func propsDiff(want, base mapping.Effective) (mapping.Props, error) {
	var w, b map[string]json.RawMessage
	if err := json.Unmarshal(want.JSON(), &w); err != nil {
		return mapping.Props{}, err
	}
	if err := json.Unmarshal(base.JSON(), &b); err != nil {
		return mapping.Props{}, err
	}
	diff := map[string]json.RawMessage{}
	for k, v := range w {
		if !bytes.Equal(v, b[k]) {
			diff[k] = v
		}
	}
	if _, ok := w["hooks"]; !ok {
		if _, ok := b["hooks"]; ok {
			diff["hooks"] = json.RawMessage("{}") // the defaults have hooks, the queue had none
		}
	}
	text, err := json.Marshal(diff)
	if err != nil {
		return mapping.Props{}, err
	}
	return mapping.ParseProps(text)
}

// copyMessages moves the queue's messages until LMQ has none left to give.
func (m *migration) copyMessages(ctx context.Context, r *queueRun) error {
	kept := r.props.Hooks.PreservedHeaders()
	var lingerUntil time.Time
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		wait := time.Duration(0)
		if !lingerUntil.IsZero() {
			wait = min(500*time.Millisecond, max(time.Until(lingerUntil), 0))
		}
		msg, err := m.pull(ctx, r.name, wait, kept)
		if err != nil {
			return fmt.Errorf("pull from %q: %w", r.name, err)
		}
		if msg != nil {
			lingerUntil = time.Time{}
			if err := m.transfer(ctx, r, msg); err != nil {
				return err
			}
			continue
		}
		// Nothing available now. LMQ's size says whether more may come: it
		// counts messages delivered to clients that have not answered.
		size, err := m.sizeOf(ctx, r.name)
		if err != nil {
			return err
		}
		r.remaining.Store(size)
		accum := r.props.AccumDuration()
		if lingerUntil.IsZero() {
			if size <= 0 && accum == 0 {
				r.left = 0
				return nil
			}
			// An open window is not pullable (nor counted everywhere):
			// give an accumulating queue one window's time.
			d := m.o.Linger
			if size <= 0 {
				d = min(accum+500*time.Millisecond, m.o.Linger)
			}
			lingerUntil = time.Now().Add(d)
			continue
		}
		if size <= 0 && time.Until(lingerUntil) > accum {
			lingerUntil = time.Now().Add(accum)
		}
		if !time.Now().Before(lingerUntil) {
			r.left = max(size, 0)
			return nil
		}
	}
}

// pull takes the queue's next message from LMQ. The request outlives ctx by
// a grace period: abandoning a pull that LMQ has already answered would leave
// the message in flight there until its timeout, where a re-run right away
// would not find it.
func (m *migration) pull(ctx context.Context, queue string, wait time.Duration, kept []string) (*pulled, error) {
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(pullGrace, cancel)
		context.AfterFunc(pctx, func() { t.Stop() })
	})
	defer stop()
	return m.src.pull(pctx, queue, wait, kept)
}

// pullGrace is how long a pull under way may go on after the run was told to stop.
const pullGrace = 3 * time.Second

func (m *migration) sizeOf(ctx context.Context, queue string) (int64, error) {
	sizes, err := m.src.queueSizes(ctx)
	if err != nil {
		if m.o.Names != nil {
			return 0, nil // no /stats: trust the 204
		}
		return 0, err
	}
	return sizes[queue], nil
}

// transfer stores one pulled message in the gateway and acks it on LMQ.
// Once pulled, a message is finished even when ctx ends (storing and acking
// it is what keeps an orderly stop free of duplicates); the work is bounded
// by the retry budget instead.
func (m *migration) transfer(ctx context.Context, r *queueRun, msg *pulled) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.o.RetryFor+30*time.Second)
	defer cancel()
	digest := messageSum(msg)
	// A second delivery of a message whose copy is stored. It is stored
	// again all the same (equal content does not prove it is the same
	// message), and reported.
	first := m.matchSuspect(r.name, digest, msg.retry)
	if first != nil {
		r.dups.Add(1)
		m.log.Info("message delivered again by the source after its copy was stored: duplicate", "queue", r.name, "first_id", first.ID, "id", msg.id)
	}
	retry := msg.retry
	if retry < 0 {
		retry = r.props.Retry
	}
	// Journaled before it is stored: a run killed at any point from here
	// on leaves an entry, and the re-run looks for the copy after After.
	f := &flight{Queue: r.name, ID: msg.id, Retry: retry, Sum: digest, Bytes: msg.size, At: time.Now(), After: r.lastSeq}
	if err := m.j.putFlight(wctx, f); err != nil {
		// Only the bookkeeping of a possible duplicate is at stake.
		m.log.Warn("journal not written; a duplicate after a crash now would go unreported", "queue", r.name, "err", err)
		f = nil
	}
	seq, err := m.store(wctx, r.name, msg, retry, r.lastSeq)
	if err != nil {
		// Not stored (store gives up only when it knows): give the message
		// back at once rather than after LMQ's timeout (either way LMQ
		// counts a delivery).
		nctx, ncancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = m.src.nack(nctx, r.name, msg.id)
		ncancel()
		if f != nil {
			_ = m.j.dropFlight(nctx, f)
		}
		return fmt.Errorf("store a message of %q: %w", r.name, err)
	}
	r.lastSeq = seq
	r.copied.Add(1)
	r.bytes.Add(int64(msg.size))
	if msg.compound {
		r.compound.Add(1)
	}
	if m.o.beforeAck != nil {
		if err := m.o.beforeAck(r.name); err != nil {
			return err
		}
	}
	switch err := m.src.ack(wctx, r.name, msg.id); {
	case err == nil:
		if f != nil {
			if err := m.j.dropFlight(wctx, f); err != nil {
				return err
			}
		}
	case errors.Is(err, errGone):
		// LMQ no longer knows the delivery: it timed out (LMQ will deliver
		// the message again) or LMQ restarted. Either way the copy is stored.
		if f != nil {
			m.addSuspect(f)
		}
	default:
		return fmt.Errorf("ack on the source in %q (the message is stored; a re-run reports it if it comes again): %w", r.name, err)
	}
	// Only now is the first copy's entry done with: had this run died
	// before, a re-run would still have known about it.
	if first != nil {
		return m.j.dropFlight(wctx, first)
	}
	return nil
}

// store stores the message on the queue's subject and returns its stream
// sequence, retrying while the target is unavailable. A store whose answer
// was lost (gateway.ErrUnknown) may have taken effect: before trying again,
// it looks for the copy (stamped with mapping.HdrMigrated) after sequence
// after, so that a retry never stores it twice. It bypasses core.Push on
// purpose: Push would run the message through the queue's accumulation and
// give it a fresh retry count.
func (m *migration) store(ctx context.Context, queue string, msg *pulled, retry int, after uint64) (uint64, error) {
	backoff := 100 * time.Millisecond
	for {
		seq, err := m.storeOnce(ctx, queue, msg, retry)
		if err == nil {
			return seq, nil
		}
		unknown := errors.Is(err, gateway.ErrUnknown)
		if !unknown && !errors.Is(err, gateway.ErrUnavailable) {
			return 0, err
		}
		m.log.Warn("target not available; retrying", "queue", queue, "err", err)
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
		if unknown {
			switch seq, ok, ferr := m.findCopy(ctx, queue, msg.id, after); {
			case ferr != nil:
				continue // the target is still away; look again next time
			case ok:
				return seq, nil
			}
		}
	}
}

// storeOnce is one attempt of store, through the core's one way of storing
// (its retries while no stream leader answers, its clean-up of a large body
// that was certainly not stored).
func (m *migration) storeOnce(ctx context.Context, queue string, msg *pulled, retry int) (uint64, error) {
	c := gateway.Copy{Message: msg.msg, Retry: retry, Origin: msg.id, Create: true}
	if msg.compound {
		c.Parts = msg.parts
		if c.Parts == nil {
			c.Parts = []gateway.Message{}
		}
	}
	seq, err := m.core.Logs().StoreCopy(ctx, queue, c)
	if err != nil {
		return 0, err
	}
	m.core.Messages().Notify(queue)
	return seq, nil
}

// maxScan bounds the search for a copy after an interruption: messages
// pushed to the queue since, by clients of the gateway.
const maxScan = 100_000

// findCopy looks in the queue's stream, from sequence after+1 on, for the
// copy of LMQ delivery id (stamped mapping.HdrMigrated). A released copy
// carries the stamp too. ok is false when there is none; err also when the
// search was cut short, as a copy may then exist.
func (m *migration) findCopy(ctx context.Context, queue, id string, after uint64) (seq uint64, ok bool, err error) {
	st, err := m.core.Logs().QueueLog(ctx, queue)
	if errors.Is(err, gateway.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	next := after + 1
	for range maxScan {
		e, err := st.NextQueued(ctx, next)
		if err != nil {
			return 0, false, err
		}
		if e == nil {
			return 0, false, nil
		}
		if e.Origin == id {
			return e.Seq, true, nil
		}
		next = e.Seq + 1
	}
	return 0, false, fmt.Errorf("no copy of %s within %d messages of %q", id, maxScan, queue)
}

// messageSum is a digest of a message's content and metadata, the same for
// every delivery of it: it recognises a message LMQ delivers again.
func messageSum(p *pulled) string {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	msg := func(m gateway.Message) {
		field([]byte(m.ContentType))
		for _, k := range m.Kept {
			field([]byte(k.Name))
			field([]byte(k.Value))
		}
		field(m.Body)
	}
	if p.compound {
		h.Write([]byte{'c'})
		for _, part := range p.parts {
			msg(part)
		}
	} else {
		h.Write([]byte{'n'})
		msg(p.msg)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

// redactedURLs is a comma-separated list of URLs fit for a message: the
// embedded server's URL carries its password.
func redactedURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}
