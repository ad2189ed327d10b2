package main

// The "queues" workload (issue 13): what many queues cost the gateway. It
// runs alone, on gateways of its own: one node with its embedded NATS on a
// fresh data directory, then (--mq-cluster-queues) an embedded three-node
// cluster. Every phase has a time budget (--mq-budget), so that a layout
// that is slow at many queues still ends the run; the table then says how
// far each phase got.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const wQueues = "queues"

// mqRow is one line of the queues table.
type mqRow struct {
	what, figure, target, notes string
}

// mqTarget is the figure issue 13 asks for, for the rows that have one.
var mqTarget = map[string]string{
	"rss":      "≤ 256 MB at 10,000",
	"create":   "≥ 2,000/s",
	"restart":  "≤ 3 s",
	"list":     "≤ 250 ms",
	"pullany":  "≤ 100 ms",
	"idlecpu":  "no measurable CPU",
	"active":   "state it",
	"throughp": "≥ today's",
	"oneq":     "across ≥ 50% of one queue (issue 30)",
	"peak":     "≤ 1 GB with 10,000 in use (issue 30)",
	"raft":     "not growing with queues that merely exist",
}

func (b *bench) mqAdd(key, what, figure, notes string) {
	b.mq = append(b.mq, mqRow{what: what, figure: figure, target: mqTarget[key], notes: notes})
	b.log.Info("queues", "what", what, "figure", figure, "notes", notes)
}

// mqRun is the state of the single-node part of the workload.
type mqRun struct {
	b     *bench
	t     *httpTarget
	names []string
	full  []bool // the queue holds the bench's one message
	// existing: the queues the creation phase made (all of names unless
	// its budget ran out).
	existing []string
	prefix   string
	created  int
	body     []byte
}

// manyQueues runs the workload and records its rows in b.mq.
func (b *bench) manyQueues(ctx context.Context) error {
	cfg := b.cfg
	if !cfg.spawn {
		return errors.New("--workloads queues restarts the gateway: it needs spawn mode (no --http/--rpc/--nats)")
	}
	g, err := spawnGateway(ctx, cfg, nil, b.log)
	if err != nil {
		return err
	}
	b.gw, b.gwPID, b.httpAddr = g, g.pid(), g.httpAddr
	t := newGatewayHTTPTarget(g.httpAddr, max(cfg.mqActive, cfg.mqClients)+16)
	b.targets = []target{t}
	r := &mqRun{b: b, t: t, prefix: "mqb-" + b.runID + "/", body: newBody(memMsgSize)}
	if err := r.single(ctx); err != nil {
		return err
	}
	if cfg.mqClusterQueues > 0 {
		// The single node's memory and CPU are not the cluster's to share.
		g.halt()
		if err := b.mqCluster(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (r *mqRun) single(ctx context.Context) error {
	b, cfg := r.b, r.b.cfg
	n := cfg.mqQueues
	r.names = make([]string, n)
	r.full = make([]bool, n)
	for i := range r.names {
		// Names with structure, as LMQ users give them.
		r.names[i] = fmt.Sprintf("%s%05d/temp", r.prefix, i)
	}
	rss0, _, _ := procRSS(b.gwPID)

	// Creation: the first push to each new queue.
	start := time.Now()
	var done atomic.Int64
	var failures errTally
	err := r.budgeted(ctx, n, cfg.mqClients, func(ctx context.Context, i int) error {
		c := &httpClient{t: r.t}
		err := pushTried(ctx, &failures, func(int) error { return c.push(ctx, r.names[i], r.body) })
		switch {
		case err == nil:
			r.full[i] = true
			done.Add(1)
		case ctx.Err() != nil:
			return ctx.Err()
		}
		return nil // failed three times: counted, and the phase goes on
	})
	el := time.Since(start)
	r.created = int(done.Load())
	for i, ok := range r.full {
		if ok {
			r.existing = append(r.existing, r.names[i])
		}
	}
	reached := ""
	if errors.Is(err, context.DeadlineExceeded) {
		reached = fmt.Sprintf("budget %s reached: ", cfg.mqBudget)
	} else if err != nil {
		return fmt.Errorf("creating queues: %w", err)
	}
	note := fmt.Sprintf("%s%s of %s queues in %s", reached, fmtInt(int64(r.created)), fmtInt(int64(n)), el.Round(time.Millisecond))
	if f := failures.n.Load(); f > 0 {
		note += fmt.Sprintf("; %d failed pushes (retried), first: %s", f, failures.firstString())
	}
	b.mqAdd("create", "creation: first push of 256 B to new queues, "+strconv.Itoa(cfg.mqClients)+" clients",
		fmt.Sprintf("%s queues/s", fmtRate(float64(r.created)/el.Seconds())), note)
	rss1, _, _ := procRSS(b.gwPID)
	b.mqAdd("rss", fmt.Sprintf("gateway RSS with %s queues of one message", fmtInt(int64(r.created))),
		fmtMiB(rss1), fmt.Sprintf("%s before the queues; %s per queue", fmtMiB(rss0), perQueue(rss1-rss0, r.created)))
	if err := b.checkAlive(); err != nil {
		return err
	}

	// Listing and stats, through the API and the status subcommand.
	r.timeListings(ctx, "before restart")

	// Restart on the same data directory.
	if err := r.restart(ctx); err != nil {
		return err
	}

	// Every message back, one pull + ack per queue: this also empties the
	// queues for pull-any.
	drained := r.drain(ctx)
	if err := b.checkAlive(); err != nil {
		return err
	}

	r.idleAndPullAny(ctx, drained)
	if err := b.checkAlive(); err != nil {
		return err
	}
	return r.active(ctx)
}

// budgeted is parallel bounded by --mq-budget; it returns
// context.DeadlineExceeded when the budget ran out first.
func (r *mqRun) budgeted(ctx context.Context, n, conc int, fn func(ctx context.Context, i int) error) error {
	bctx, cancel := context.WithTimeout(ctx, r.b.cfg.mqBudget)
	defer cancel()
	err := parallel(bctx, n, conc, fn)
	if err != nil && bctx.Err() != nil && ctx.Err() == nil {
		return context.DeadlineExceeded
	}
	return err
}

// pushTried pushes with push (given the try's number), trying again when
// the gateway could not store the message (503, 504 under load), three
// tries in all, each failure counted in failures. It returns nil once a
// push is stored, ctx's error when ctx ends, else the last failure.
func pushTried(ctx context.Context, failures *errTally, push func(try int) error) error {
	var err error
	for try := range 3 {
		if err = push(try); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		failures.add(err)
		pauseAfterError(ctx)
	}
	return err
}

func perQueue(bytes int64, n int) string {
	if n <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f KiB", float64(bytes)/float64(n)/1024)
}

// get performs GET path on the gateway within the budget.
func (r *mqRun) get(ctx context.Context, path string) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.b.cfg.mqBudget)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.t.base+path, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := r.t.hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", path, err)
	}
	var buf bytes.Buffer
	body, err := drain(resp.Body, &buf)
	if err != nil {
		return resp, nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return resp, body, nil
}

// listed is what GET /queues says about the bench's queues: how many are
// listed and the sum of their sizes.
func (r *mqRun) listed(ctx context.Context) (queues, msgs int, took time.Duration, err error) {
	start := time.Now()
	sizes, err := r.listedSizes(ctx)
	took = time.Since(start)
	for _, n := range sizes {
		queues++
		msgs += n
	}
	return queues, msgs, took, err
}

// listedSizes is GET /queues: the size of each of the bench's queues.
func (r *mqRun) listedSizes(ctx context.Context) (map[string]int, error) {
	resp, body, err := r.get(ctx, "/queues")
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /queues: HTTP %d: %s", resp.StatusCode, snippet(body))
	}
	var doc struct {
		Queues []struct {
			Name string `json:"name"`
			Size *int   `json:"size"`
		} `json:"queues"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("GET /queues: %w", err)
	}
	sizes := map[string]int{}
	for _, q := range doc.Queues {
		if strings.HasPrefix(q.Name, r.prefix) {
			sizes[q.Name] = 0
			if q.Size != nil {
				sizes[q.Name] = *q.Size
			}
		}
	}
	return sizes, nil
}

// timeListings times GET /stats, GET /queues and `lmq-gateway status`,
// --mq-repeat times each (median), and checks what /queues lists.
func (r *mqRun) timeListings(ctx context.Context, when string) {
	b, cfg := r.b, r.b.cfg
	measure := func(what string, once func() error) {
		var ds []time.Duration
		var firstErr error
		spent := time.Duration(0)
		for range cfg.mqRepeat {
			start := time.Now()
			err := once()
			d := time.Since(start)
			spent += d
			if err != nil {
				firstErr = err
				break
			}
			ds = append(ds, d)
			if spent > cfg.mqBudget/2 {
				break // slow enough that more runs only cost time
			}
		}
		if len(ds) == 0 {
			b.mqAdd("list", what, "failed", firstLine(fmt.Sprint(firstErr)))
			return
		}
		slices.Sort(ds)
		var all []string
		for _, d := range ds {
			all = append(all, fmtDur(d))
		}
		note := fmt.Sprintf("%s; median of %d: %s", when, len(ds), strings.Join(all, ", "))
		if firstErr != nil {
			note += "; then " + firstLine(firstErr.Error())
		}
		b.mqAdd("list", what, fmtDur(ds[(len(ds)-1)/2]), note)
	}
	measure("GET /stats", func() error {
		resp, body, err := r.get(ctx, "/stats")
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, snippet(body))
		}
		return err
	})
	var nq, nm int
	measure("GET /queues", func() error {
		var err error
		nq, nm, _, err = r.listed(ctx)
		return err
	})
	measure("lmq-gateway status", func() error {
		sctx, cancel := context.WithTimeout(ctx, cfg.mqBudget)
		defer cancel()
		cmd := exec.CommandContext(sctx, b.gw.bin, "status", "--http", b.gw.httpAddr, "--timeout", cfg.mqBudget.String())
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("status: %w: %s", err, snippet(out))
		}
		return nil
	})
	b.mqAdd("", "GET /queues lists ("+when+")", fmt.Sprintf("%s queues, %s messages", fmtInt(int64(nq)), fmtInt(int64(nm))),
		fmt.Sprintf("%s queues hold one message each", fmtInt(int64(r.created))))
}

// restart stops the gateway (SIGTERM) and starts it on the same directory,
// timing both, and checks that every message is listed again.
func (r *mqRun) restart(ctx context.Context) error {
	b, cfg, g := r.b, r.b.cfg, r.b.gw
	start := time.Now()
	killed := g.stopWithin(cfg.mqBudget)
	stopped := time.Since(start)
	note := "SIGTERM until the process exited"
	if killed {
		note = fmt.Sprintf("did not exit within the budget %s: killed", cfg.mqBudget)
	}
	b.mqAdd("", "stop", fmtDur(stopped), note)

	start = time.Now()
	if err := g.launch(); err != nil {
		return err
	}
	b.gwPID = g.pid()
	ready, err := r.awaitReady(ctx, cfg.mqBudget)
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("restart: %w\n--- gateway log (tail) ---\n%s", err, tail(g.logPath, 40))
	}
	if !ready {
		b.mqAdd("restart", "restart until /readyz answers 200", "> "+fmtDur(took),
			fmt.Sprintf("budget %s reached; the rest of the run waits for it", cfg.mqBudget))
		if ok, err := r.awaitReady(ctx, 10*cfg.mqBudget); err != nil || !ok {
			return fmt.Errorf("gateway not ready after restart (%v)", err)
		}
	} else {
		b.mqAdd("restart", "restart until /readyz answers 200", fmtDur(took), "same data dir; process start to the first 200")
	}
	// The messages, as listed: polled until all are there (a layout may
	// list what it has loaded so far) or the budget ends.
	deadline := time.Now().Add(cfg.mqBudget)
	var nq, nm int
	for {
		nq, nm, _, err = r.listed(ctx)
		if (err == nil && nm >= r.created) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	figure := fmt.Sprintf("%s of %s messages", fmtInt(int64(nm)), fmtInt(int64(r.created)))
	if err != nil {
		figure = "failed: " + firstLine(err.Error())
	}
	b.mqAdd("", "after restart, GET /queues lists", figure,
		fmt.Sprintf("%s queues listed, %s after the start", fmtInt(int64(nq)), time.Since(start).Round(time.Millisecond)))
	r.timeListings(ctx, "after restart")
	return nil
}

// stopWithin sends SIGTERM and waits up to d for the exit, then kills; it
// reports whether it had to kill.
func (g *gatewayProc) stopWithin(d time.Duration) bool {
	if g.cmd == nil || g.cmd.Process == nil {
		return false
	}
	select {
	case <-g.exited:
		return false
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
		return false
	case <-time.After(d):
		_ = g.cmd.Process.Kill()
		<-g.exited
		return true
	}
}

// awaitReady polls /readyz until it answers 200 (true), the limit passes
// (false) or the process exits (error).
func (r *mqRun) awaitReady(ctx context.Context, limit time.Duration) (bool, error) {
	return awaitReadyz(ctx, r.b.gw, r.t.hc, limit)
}

func awaitReadyz(ctx context.Context, g *gatewayProc, hc *http.Client, limit time.Duration) (bool, error) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+g.httpAddr+"/readyz", nil)
		if err != nil {
			cancel()
			return false, err
		}
		if resp, err := hc.Do(req); err == nil {
			_, _ = drain(resp.Body, nil)
			if resp.StatusCode == http.StatusOK {
				cancel()
				return true, nil
			}
		}
		cancel()
		select {
		case <-g.exited:
			return false, fmt.Errorf("gateway exited: %v", g.waitErr)
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false, nil
}

// drain pulls and acks the one message of every created queue and reports
// whether all came back (every queue is then empty).
func (r *mqRun) drain(ctx context.Context) bool {
	b, cfg := r.b, r.b.cfg
	var got, wrong, empty atomic.Int64
	var failures errTally
	start := time.Now()
	err := r.budgeted(ctx, len(r.names), cfg.mqClients, func(ctx context.Context, i int) error {
		if !r.full[i] {
			return nil
		}
		c := &httpClient{t: r.t}
		body, ack, err := c.pull(ctx, r.names[i], 0)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failures.add(err)
			return nil
		}
		if ack == nil {
			empty.Add(1)
			return nil
		}
		if !bytes.Equal(body, r.body) {
			wrong.Add(1)
		}
		if err := ack(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failures.add(err)
			return nil
		}
		r.full[i] = false
		got.Add(1)
		return nil
	})
	el := time.Since(start)
	// A push cut off by the creation budget may have been stored without
	// the bench seeing its answer: such messages would be found by
	// pull-any in place of the ones it pushes. Listed, they are taken too.
	var extra atomic.Int64
	if sizes, lerr := r.listedSizes(ctx); lerr == nil && err == nil {
		var left []string
		for name, n := range sizes {
			if n > 0 {
				left = append(left, name)
			}
		}
		err = r.budgeted(ctx, len(left), cfg.mqClients, func(ctx context.Context, i int) error {
			c := &httpClient{t: r.t}
			for {
				_, ack, err := c.pull(ctx, left[i], 0)
				if err != nil || ack == nil {
					return err
				}
				if err := ack(ctx); err != nil {
					return err
				}
				extra.Add(1)
			}
		})
	}
	note := fmt.Sprintf("one pull (t=0) + ack per queue, %d clients, %s, %s pulls+acks/s", cfg.mqClients, el.Round(time.Millisecond), fmtRate(float64(got.Load())/el.Seconds()))
	if x := extra.Load(); x > 0 {
		note += fmt.Sprintf("; then %d messages of pushes whose answers the creation budget cut off", x)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		note = fmt.Sprintf("budget %s reached; ", cfg.mqBudget) + note
	} else if err != nil {
		note = "stopped by: " + firstLine(err.Error()) + "; " + note
	}
	if w := wrong.Load(); w > 0 {
		note += fmt.Sprintf("; %d with a wrong body", w)
	}
	if f := failures.n.Load(); f > 0 {
		note += fmt.Sprintf("; %d pulls or acks failed, first: %s", f, failures.firstString())
	}
	if e := empty.Load(); e > 0 {
		note += fmt.Sprintf("; %d queues answered 204 (message missing)", e)
	}
	b.mqAdd("", "after restart, pulled back", fmt.Sprintf("%s of %s messages", fmtInt(got.Load()), fmtInt(int64(r.created))), note)
	return got.Load() == int64(r.created) && err == nil
}

// waitingPulls reads lmq_long_polls_waiting from /metrics (-1 if absent).
func (r *mqRun) waitingPulls(ctx context.Context) float64 {
	resp, body, err := r.get(ctx, "/metrics")
	if err != nil || resp.StatusCode != http.StatusOK {
		return -1
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "lmq_long_polls_waiting "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// awaitAtMost polls until at most n pulls wait (pulls given up by the bench
// have left the gauge); false at the deadline.
func (r *mqRun) awaitAtMost(ctx context.Context, n float64, deadline time.Time) bool {
	for time.Now().Before(deadline) && ctx.Err() == nil {
		start := time.Now()
		if v := r.waitingPulls(ctx); v >= 0 && v <= n {
			return true
		}
		_ = sleepCtx(ctx, pollPause(time.Since(start)))
	}
	return false
}

// pollPause is the pause between two reads of /metrics: 20 ms, or twice
// what the last read took. With 10,000 queues a scrape renders some 150,000
// series (~80 MB of garbage in the gateway), and back-to-back scrapes would
// make the bench's own polling the gateway's main load and inflate the RSS
// it measures.
func pollPause(took time.Duration) time.Duration {
	return max(20*time.Millisecond, 2*took)
}

// awaitWaiting polls until at least n pulls wait; false at the deadline.
func (r *mqRun) awaitWaiting(ctx context.Context, n int, deadline time.Time) bool {
	for time.Now().Before(deadline) && ctx.Err() == nil {
		start := time.Now()
		if r.waitingPulls(ctx) >= float64(n) {
			return true
		}
		_ = sleepCtx(ctx, pollPause(time.Since(start)))
	}
	return false
}

// pullResult is a pull's answer: the queue and delivery id of a message.
type pullResult struct {
	status int
	queue  string
	id     string
	body   []byte
	at     time.Time
	err    error
}

// rawPull is GET path (a pull) answered with its headers.
func (r *mqRun) rawPull(ctx context.Context, path string) pullResult {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.t.base+path, nil)
	if err != nil {
		return pullResult{err: err}
	}
	resp, err := r.t.hc.Do(req)
	if err != nil {
		return pullResult{err: err, at: time.Now()}
	}
	var buf bytes.Buffer
	body, err := drain(resp.Body, &buf)
	return pullResult{status: resp.StatusCode, queue: resp.Header.Get("X-Lmq-Queue-Name"), id: resp.Header.Get("X-Lmq-Message-Id"),
		body: slices.Clone(body), at: time.Now(), err: err}
}

func (r *mqRun) ack(ctx context.Context, queue, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.t.messagesURL(queue)+"/"+url.PathEscape(id)+"?reply=ack", nil)
	if err != nil {
		return err
	}
	resp, err := r.t.hc.Do(req)
	if err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	b, _ := drain(resp.Body, nil)
	if resp.StatusCode != http.StatusNoContent {
		return &errStatus{op: "ack", status: resp.StatusCode, body: snippet(b)}
	}
	return nil
}

// cpuOver is the gateway's CPU time over d.
func (r *mqRun) cpuOver(ctx context.Context, d time.Duration) (time.Duration, error) {
	c0, err := procCPU(r.b.gwPID)
	if err != nil {
		return 0, err
	}
	if err := sleepCtx(ctx, d); err != nil {
		return 0, err
	}
	c1, err := procCPU(r.b.gwPID)
	return c1 - c0, err
}

func fmtCPU(cpu, over time.Duration) string {
	return fmt.Sprintf("%s CPU in %s (%.1f%% of a core)", fmtDur(cpu), over, 100*cpu.Seconds()/over.Seconds())
}

// idleAndPullAny measures the gateway's CPU while idle and while a pull-any
// over all the (empty) queues waits, then the time from a push to a random
// queue until the waiting pull-any returns it.
func (r *mqRun) idleAndPullAny(ctx context.Context, empty bool) {
	b, cfg := r.b, r.b.cfg
	if !empty {
		b.mqAdd("pullany", "pull-any over all queues", "skipped", "the queues could not all be emptied first")
		return
	}
	const over = 5 * time.Second
	base := max(r.waitingPulls(ctx), 0)
	if cpu, err := r.cpuOver(ctx, over); err == nil {
		b.mqAdd("idlecpu", "gateway CPU, idle, nothing waiting", fmtDur(cpu), fmtCPU(cpu, over))
	}
	re := "^" + regexpQuote(r.prefix)
	anyPath := "/messages?qre=" + url.QueryEscape(re) + "&t=" + strconv.Itoa(int(cfg.mqBudget.Seconds()))

	// CPU while one pull-any waits on all the empty queues.
	pctx, cancel := context.WithCancel(ctx)
	res := make(chan pullResult, 1)
	go func() { res <- r.rawPull(pctx, anyPath) }()
	if !r.awaitWaiting(ctx, int(base)+1, time.Now().Add(cfg.mqBudget)) {
		cancel()
		b.mqAdd("idlecpu", "gateway CPU, pull-any waiting over all queues", "—", "the pull-any never showed in lmq_long_polls_waiting")
	} else {
		cpu, err := r.cpuOver(ctx, over)
		if err == nil {
			b.mqAdd("idlecpu", fmt.Sprintf("gateway CPU, pull-any waiting over %s empty queues", fmtInt(int64(len(r.existing)))), fmtDur(cpu), fmtCPU(cpu, over))
		}
		cancel()
	}
	if pr := <-res; pr.status == http.StatusOK {
		b.mqAdd("", "pull-any while measuring CPU", "unexpected message", pr.queue)
	}

	// Latency: a pull-any waits, a push to a random queue, the pull returns.
	var lat []time.Duration
	var misses []string
	deadline := time.Now().Add(cfg.mqBudget)
	for k := 0; k < cfg.mqSamples && time.Now().Before(deadline) && ctx.Err() == nil; k++ {
		if !r.awaitAtMost(ctx, base, deadline) {
			misses = append(misses, "earlier pulls still counted as waiting")
			break
		}
		res := make(chan pullResult, 1)
		go func() { res <- r.rawPull(ctx, anyPath) }()
		if !r.awaitWaiting(ctx, int(base)+1, deadline) {
			misses = append(misses, "pull-any not waiting")
			<-res
			break
		}
		q := r.existing[rand.IntN(len(r.existing))]
		t0 := time.Now()
		c := &httpClient{t: r.t}
		if err := c.push(ctx, q, r.body); err != nil {
			misses = append(misses, firstLine(err.Error()))
			<-res
			continue
		}
		pr := <-res
		switch {
		case pr.err != nil:
			misses = append(misses, firstLine(pr.err.Error()))
		case pr.status != http.StatusOK:
			misses = append(misses, fmt.Sprintf("HTTP %d", pr.status))
		case pr.queue != q:
			misses = append(misses, "returned "+pr.queue)
		default:
			lat = append(lat, pr.at.Sub(t0))
		}
		if pr.status == http.StatusOK {
			_ = r.ack(ctx, pr.queue, pr.id)
		}
	}
	if len(lat) == 0 {
		b.mqAdd("pullany", "pull-any: push to a random queue until the waiting pull-any returns it", "no sample", strings.Join(misses, "; "))
		return
	}
	p := percentilesOf(lat)
	note := fmt.Sprintf("%d samples over %s queues, from sending the push; qre %s", len(lat), fmtInt(int64(len(r.existing))), re)
	if len(misses) > 0 {
		note += fmt.Sprintf("; %d failed: %s", len(misses), misses[0])
	}
	b.mqAdd("pullany", "pull-any: push to a random queue until the waiting pull-any returns it (p50 / p99)",
		fmtDur(p.p50)+" / "+fmtDur(p.p99), note)
}

// regexpQuote escapes RE2 metacharacters.
func regexpQuote(s string) string {
	var sb strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, c) {
			sb.WriteByte('\\')
		}
		sb.WriteRune(c)
	}
	return sb.String()
}

// active measures what a queue in use costs, on --mq-active fresh queues
// (the drain made every queue of the first set active already): each gets
// a message (RSS: queues at rest), a pull of it (RSS: a delivery in flight
// on each), the acks, then a waiting pull on each (RSS again). Then push and
// pull+ack cells run across them.
func (r *mqRun) active(ctx context.Context) error {
	b, cfg := r.b, r.b.cfg
	a := cfg.mqActive
	names := make([]string, a)
	for i := range names {
		names[i] = fmt.Sprintf("mqa-%s/%05d", b.runID, i)
	}
	if err := r.budgeted(ctx, a, cfg.mqClients, func(ctx context.Context, i int) error {
		return (&httpClient{t: r.t}).push(ctx, names[i], r.body)
	}); err != nil {
		return fmt.Errorf("active queues: %w", err)
	}
	r.awaitAtMost(ctx, 0, time.Now().Add(cfg.mqBudget))
	rss0, _, _ := procRSS(b.gwPID)

	// A delivery in flight on each: all pulled at once.
	results := make(chan pullResult, a)
	start := time.Now()
	for _, q := range names {
		go func() { results <- r.rawPull(ctx, "/messages/"+url.PathEscape(q)+"?t=30") }()
	}
	var got []pullResult
	var failed int
	for range a {
		if pr := <-results; pr.status == http.StatusOK {
			got = append(got, pr)
		} else {
			failed++
		}
	}
	took := time.Since(start)
	rss1, _, _ := procRSS(b.gwPID)
	b.mqAdd("active", "a delivery in flight on each of "+fmtInt(int64(a))+" queues (first pull of each): RSS",
		perQueue(rss1-rss0, a)+" per active queue",
		fmt.Sprintf("RSS %s at rest → %s; %s of %d pulls returned their message, all in %s", fmtMiB(rss0), fmtMiB(rss1), fmtInt(int64(len(got))), a, took.Round(time.Millisecond)))
	var mu sync.Mutex
	var ackErr error
	_ = r.budgeted(ctx, len(got), cfg.mqClients, func(ctx context.Context, i int) error {
		if err := r.ack(ctx, got[i].queue, got[i].id); err != nil {
			mu.Lock()
			ackErr = err
			mu.Unlock()
		}
		return nil
	})
	if ackErr != nil {
		b.mqAdd("", "acks of the deliveries", "failed", firstLine(ackErr.Error()))
	}

	// A waiting pull on each (empty) queue.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait := strconv.Itoa(int(cfg.mqBudget.Seconds()) + 60)
	start = time.Now()
	for _, q := range names {
		go func() { results <- r.rawPull(wctx, "/messages/"+url.PathEscape(q)+"?t="+wait) }()
	}
	all := r.awaitWaiting(ctx, a, time.Now().Add(cfg.mqBudget))
	took = time.Since(start)
	rss2, _, _ := procRSS(b.gwPID)
	note := fmt.Sprintf("%s waiting pulls, one per queue, all waiting after %s; RSS %s at rest → %s", fmtInt(int64(a)), took.Round(time.Millisecond), fmtMiB(rss0), fmtMiB(rss2))
	if !all {
		note = fmt.Sprintf("only %.0f of %d pulls waiting within the budget; ", r.waitingPulls(ctx), a) + note
	}
	b.mqAdd("active", "then a waiting pull on each of "+fmtInt(int64(a))+" queues: RSS", perQueue(rss2-rss0, a)+" per active queue", note)
	cancel()
	for range a {
		if pr := <-results; pr.status == http.StatusOK {
			_ = r.ack(ctx, pr.queue, pr.id) // none expected: the queues are empty
		}
	}
	r.awaitAtMost(ctx, 0, time.Now().Add(cfg.mqBudget))

	// Throughput across the active queues: the bench's push and pull+ack
	// cells (closed loop, --mq-clients clients, --duration each).
	qs := &queueSet{names: names, remaining: make([]atomic.Int64, a), dirty: make([]atomic.Bool, a)}
	pr, err := b.pushCell(ctx, r.t, qs, cfg.mqClients, memMsgSize)
	if err != nil {
		return err
	}
	pr = b.measured(r.t, pr)
	b.mqAdd("throughp", fmt.Sprintf("push across %s queues, C=%d, 256 B", fmtInt(int64(a)), cfg.mqClients),
		fmtRate(pr.rate)+" msgs/s", fmt.Sprintf("p50 %s, p99 %s, %d µs CPU/msg, %d errors", fmtDur(pr.lat.p50), fmtDur(pr.lat.p99), cpuMicros(pr), pr.errors))
	pl, err := b.pullCell(ctx, r.t, qs, cfg.mqClients, memMsgSize)
	if err != nil {
		return err
	}
	pl = b.measured(r.t, pl)
	b.mqAdd("throughp", fmt.Sprintf("pull+ack across %s queues, C=%d, 256 B", fmtInt(int64(a)), cfg.mqClients),
		fmtRate(pl.rate)+" msgs/s", fmt.Sprintf("p50 %s, p99 %s, %d µs CPU/msg, %d errors, %d missing; RSS after %s", fmtDur(pl.lat.p50), fmtDur(pl.lat.p99), cpuMicros(pl), pl.errors, pl.missing, fmtMiB(b.serverRSS())))
	return r.oneQueueReference(ctx, names[0], pl)
}

// oneQueueReference runs the same push and pull+ack cells on one of the
// active queues, with every other queue's consumer still there, and states
// the pull+ack rate across all of them as a share of this one-queue rate
// (issue 30: at least 50%), and the highest RSS of the process so far
// (issue 30: 1 GB for 10,000 queues in use).
func (r *mqRun) oneQueueReference(ctx context.Context, name string, across cellResult) error {
	b, cfg := r.b, r.b.cfg
	one := &queueSet{names: []string{name}, remaining: make([]atomic.Int64, 1), dirty: make([]atomic.Bool, 1)}
	if _, err := b.pushCell(ctx, r.t, one, cfg.mqClients, memMsgSize); err != nil {
		return err
	}
	pl, err := b.pullCell(ctx, r.t, one, cfg.mqClients, memMsgSize)
	if err != nil {
		return err
	}
	pl = b.measured(r.t, pl)
	share := "—"
	if pl.rate > 0 {
		share = fmt.Sprintf("%.0f%%", 100*across.rate/pl.rate)
	}
	b.mqAdd("oneq", fmt.Sprintf("pull+ack on one of them, C=%d, 256 B; the rate across all as a share of it", cfg.mqClients),
		fmtRate(pl.rate)+" msgs/s; "+share, fmt.Sprintf("p50 %s, p99 %s, %d µs CPU/msg, %d errors, %d missing", fmtDur(pl.lat.p50), fmtDur(pl.lat.p99), cpuMicros(pl), pl.errors, pl.missing))
	if _, hwm, err := procRSS(b.gwPID); err == nil {
		limit := os.Getenv("GOMEMLIMIT") // the spawned gateway's environment is the bench's
		if limit == "" {
			limit = "not set"
		}
		b.mqAdd("peak", fmt.Sprintf("highest RSS of the gateway process so far (VmHWM), %s queues in use", fmtInt(int64(cfg.mqActive))),
			fmtMiB(hwm), fmt.Sprintf("RSS now %s; GOMEMLIMIT %s; the first set's consumers (made by its drain) count too until 5 minutes after their last pull", fmtMiB(b.serverRSS()), limit))
	}
	return nil
}

func cpuMicros(c cellResult) int64 {
	if c.msgs == 0 {
		return 0
	}
	return c.srvCPU.Microseconds() / c.msgs
}

// ---- the three-node cluster ----

// mqCluster starts an embedded three-node cluster (--replicas 3), counts its
// Raft groups, creates --mq-cluster-queues queues of one message, and
// counts again.
func (b *bench) mqCluster(ctx context.Context) error {
	cfg := b.cfg
	nodes, err := spawnClusterRetry(ctx, cfg, b.gw.bin, b.log)
	if err != nil {
		return err
	}
	defer func() {
		for _, g := range nodes {
			g.stop()
		}
	}()
	var urls []string
	for _, g := range nodes {
		urls = append(urls, g.natsURL)
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Name("lmq-bench-raft"), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("cluster: connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	g0, d0, err := raftGroups(ctx, js)
	if err != nil {
		return err
	}
	m := cfg.mqClusterQueues
	hcs := make([]*httpTarget, len(nodes))
	for i, g := range nodes {
		hcs[i] = newGatewayHTTPTarget(g.httpAddr, cfg.mqClients+16)
		defer hcs[i].close()
	}
	body := newBody(memMsgSize)
	prefix := "mqc-" + b.runID + "/"
	var done atomic.Int64
	var failures errTally
	start := time.Now()
	bctx, cancel := context.WithTimeout(ctx, cfg.mqBudget)
	err = parallel(bctx, m, cfg.mqClients, func(ctx context.Context, i int) error {
		// Each try goes through the next gateway.
		err := pushTried(ctx, &failures, func(try int) error {
			c := &httpClient{t: hcs[(i+try)%len(hcs)]}
			return c.push(ctx, fmt.Sprintf("%s%05d", prefix, i), body)
		})
		if err == nil {
			done.Add(1)
		}
		return err
	})
	budgetHit := bctx.Err() != nil
	cancel()
	el := time.Since(start)
	note := fmt.Sprintf("%s of %s queues in %s, through the 3 gateways", fmtInt(done.Load()), fmtInt(int64(m)), el.Round(time.Millisecond))
	if err != nil && ctx.Err() == nil {
		if budgetHit {
			note = fmt.Sprintf("budget %s reached: ", cfg.mqBudget) + note
		} else {
			note = "stopped (" + firstLine(err.Error()) + "): " + note
		}
	}
	if f := failures.n.Load(); f > 0 {
		note += fmt.Sprintf("; %d failed pushes (retried), first: %s", f, failures.firstString())
	}
	b.mqAdd("create", "cluster (3 nodes, --replicas 3): creation", fmtRate(float64(done.Load())/el.Seconds())+" queues/s", note)
	g1, d1, err := raftGroups(ctx, js)
	if err != nil {
		return err
	}
	b.mqAdd("raft", "cluster: Raft groups before → after the queues", fmt.Sprintf("%d → %d", g0, g1),
		fmt.Sprintf("%s → %s; %s queues created", d0, d1, fmtInt(done.Load())))
	return ctx.Err()
}

// raftGroups counts the Raft groups of the JetStream cluster: the meta
// group, and each replicated stream and consumer (R1 assets are listed
// apart). It reads stream and consumer infos, as `nats stream report` does.
func raftGroups(ctx context.Context, js jetstream.JetStream) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var streams, consumers, r1 int
	lister := js.ListStreams(ctx)
	var infos []*jetstream.StreamInfo
	for si := range lister.Info() {
		infos = append(infos, si)
	}
	if err := lister.Err(); err != nil {
		return 0, "", fmt.Errorf("listing streams: %w", err)
	}
	for _, si := range infos {
		if si.Config.Replicas > 1 {
			streams++
		} else {
			r1++
		}
		if si.State.Consumers == 0 {
			continue
		}
		st, err := js.Stream(ctx, si.Config.Name)
		if err != nil {
			return 0, "", fmt.Errorf("stream %s: %w", si.Config.Name, err)
		}
		cl := st.ListConsumers(ctx)
		for ci := range cl.Info() {
			rep := ci.Config.Replicas
			if rep == 0 {
				rep = si.Config.Replicas
			}
			if rep > 1 {
				consumers++
			} else {
				r1++
			}
		}
		if err := cl.Err(); err != nil {
			return 0, "", fmt.Errorf("consumers of %s: %w", si.Config.Name, err)
		}
	}
	return 1 + streams + consumers, fmt.Sprintf("meta + %d streams + %d consumers (replicated; %d R1 assets besides)", streams, consumers, r1), nil
}

// spawnClusterRetry is spawnCluster, tried again (up to three times) when a
// port was taken: the nodes' ports are picked free and released before the
// nodes bind them (the routes must name them first), so another process may
// take one meanwhile. On failure it has stopped the nodes it started.
func spawnClusterRetry(ctx context.Context, cfg config, bin string, log *slog.Logger) ([]*gatewayProc, error) {
	nodes, err := spawnCluster(ctx, cfg, bin, log)
	for try := 1; err != nil && strings.Contains(err.Error(), "address already in use") && try < 3; try++ {
		for _, g := range nodes {
			g.stop()
		}
		nodes, err = spawnCluster(ctx, cfg, bin, log)
	}
	if err != nil {
		for _, g := range nodes {
			g.stop()
		}
		return nil, err
	}
	return nodes, nil
}

// spawnCluster starts three gateways whose embedded servers form one
// JetStream cluster, and waits until every one answers /readyz.
func spawnCluster(ctx context.Context, cfg config, bin string, log *slog.Logger) ([]*gatewayProc, error) {
	const n = 3
	var nodes []*gatewayProc
	ports := make([][4]int, n)
	routes := make([]string, n)
	for i := range n {
		for k := range ports[i] {
			p, err := freeLoopbackPort()
			if err != nil {
				return nil, err
			}
			ports[i][k] = p
		}
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[i][3])
	}
	pass := fmt.Sprintf("%x", rand.Uint64())
	for i := range n {
		dir, err := os.MkdirTemp("", "lmq-bench-cluster-")
		if err != nil {
			return nodes, err
		}
		g := &gatewayProc{dir: dir, bin: bin, keep: cfg.keep, natsPass: pass, log: log, procs: cfg.serverProcs}
		g.httpAddr = fmt.Sprintf("127.0.0.1:%d", ports[i][0])
		g.rpcAddr = fmt.Sprintf("127.0.0.1:%d", ports[i][1])
		g.natsAddr = fmt.Sprintf("127.0.0.1:%d", ports[i][2])
		g.natsURL = (&url.URL{Scheme: "nats", User: url.UserPassword("lmq", pass), Host: g.natsAddr}).String()
		g.dataDir = filepath.Join(dir, "data")
		g.args = []string{
			"--http-listen", g.httpAddr, "--rpc-listen", g.rpcAddr, "--nats-listen", g.natsAddr,
			"--data-dir", g.dataDir, "--access-log=false", "--log-level", "warn",
			"--server-name", fmt.Sprintf("n%d", i), "--cluster-name", "lmqbench",
			"--cluster-listen", fmt.Sprintf("127.0.0.1:%d", ports[i][3]), "--routes", strings.Join(routes, ","),
			"--replicas", "3",
		}
		nodes = append(nodes, g)
		if err := g.launch(); err != nil {
			return nodes, err
		}
	}
	hc := newHTTPClient(4)
	defer hc.CloseIdleConnections()
	for _, g := range nodes {
		ok, err := awaitReadyz(ctx, g, hc, 2*time.Minute)
		if err != nil || !ok {
			return nodes, fmt.Errorf("cluster node %s not ready (%v)\n--- log (tail) ---\n%s", g.httpAddr, err, tail(g.logPath, 40))
		}
	}
	return nodes, nil
}

// ---- report ----

func (b *bench) mqReport(w func(string, ...any)) {
	if len(b.mq) == 0 {
		return
	}
	w("## Many queues (issue 13)\n\n")
	w("%s queues of one 256-byte message each on a spawned gateway (embedded NATS, fresh data dir); %s of them in active use; each phase budgeted %s.\n\n",
		fmtInt(int64(b.cfg.mqQueues)), fmtInt(int64(b.cfg.mqActive)), b.cfg.mqBudget)
	w("| measure | figure | issue 13 target | notes |\n|---|---:|---|---|\n")
	for _, r := range b.mq {
		cell := func(s string) string { return strings.ReplaceAll(firstLine(s), "|", `\|`) }
		w("| %s | %s | %s | %s |\n", cell(r.what), cell(r.figure), orDash(r.target), cell(r.notes))
	}
	w("\n")
}
