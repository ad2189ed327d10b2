package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// bench is one run: its targets, the deployment under test, and the results
// collected for the report.
type bench struct {
	cfg   config
	log   *slog.Logger
	epoch time.Time // zero of message timestamps (monotonic)
	runID string

	gw       *gatewayProc
	httpAddr string
	rpcAddr  string
	sqsAddr  string
	natsURL  string
	gwPID    int
	natsPID  int
	// clusterNodes: the three-node cluster of --cluster 3 (nil: none); the
	// bench stops them at the end. clusterDir holds the gateway binary
	// built for them ("" when --gateway-bin was given).
	clusterNodes []*gatewayProc
	clusterDir   string

	targets []target
	// beanstalkd is the beanstalkd the bench started (nil when not
	// selected or not found); its target stops it.
	beanstalkd *beanstalkdProc
	// noop is the child process serving the ceilings (nil: none selected,
	// or --noop-in-process); the bench stops it at the end.
	noop *noopProc
	// pathEnv is the PATH in which beanstalkd is looked up (tests set
	// their own).
	pathEnv string

	facts    machineFacts
	cells    []cellResult
	e2es     []e2eResult
	maxRates []maxRateResult
	mems     []memResult
	setups   []setupResult
	notes    []string
	// peakRSS is the highest VmHWM of gateway processes the memory workload
	// replaced with fresh ones (the peak of the earlier workloads).
	peakRSS int64
	// mq: rows of the queues workload.
	mq []mqRow
	// attrs: the profiled cells' CPU by owner and kind (--profile).
	attrs attributions
	// groups: results of the groups workload (medians of --repeat).
	groups []groupsResult
}

func newBench(cfg config, stderr io.Writer) (*bench, error) {
	var id [3]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("run id: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	return &bench{cfg: cfg, log: log, epoch: time.Now(), runID: hex.EncodeToString(id[:]), pathEnv: os.Getenv("PATH")}, nil
}

// run performs the whole benchmark and writes the report, also when it was
// interrupted (with what was measured so far).
func (b *bench) run(ctx context.Context, stdout io.Writer) (err error) {
	b.facts = gatherFacts(ctx)
	defer func() {
		for _, t := range b.targets {
			if cerr := t.close(); cerr != nil {
				b.log.Warn("closing target", "target", t.name(), "err", cerr)
			}
		}
		b.gw.stop()
		b.stopCluster()
		b.noop.stop()
	}()

	var runErr error
	if b.cfg.has(wQueues) {
		b.facts.loadStart = readLoadAvg()
		b.facts.started = time.Now()
		runErr = b.manyQueues(ctx)
	} else {
		if err := b.openTargets(ctx); err != nil {
			return err
		}
		b.facts.loadStart = readLoadAvg()
		b.facts.started = time.Now()
		runErr = b.measure(ctx)
	}
	if runErr != nil {
		b.notes = append(b.notes, "RUN INCOMPLETE: "+firstLine(runErr.Error()))
	}

	b.facts.loadEnd = readLoadAvg()
	b.facts.elapsed = time.Since(b.facts.started)
	report := b.report()
	if _, err := io.WriteString(stdout, report); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	if b.cfg.out != "" {
		if err := os.WriteFile(b.cfg.out, []byte(report), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", b.cfg.out, err)
		}
	}
	return runErr
}

// openTargets starts or connects what the selected targets need. A target
// whose deployment is not given is skipped with a note, so that a partial
// deployment (only NATS, say) can still be measured.
func (b *bench) openTargets(ctx context.Context) error {
	cfg := b.cfg
	maxConc := slices.Max(cfg.conc)
	maxConc = max(maxConc, cfg.maxRateConc, cfg.memConc, cfg.setupConc)
	needGW := slices.ContainsFunc(cfg.targets, servedByGateway)
	if cfg.spawn && needGW {
		var ext *extNATS
		if cfg.cluster > 0 {
			var err error
			if ext, err = b.startCluster(ctx); err != nil {
				return err
			}
			cfg.gatewayBin = b.cfg.gatewayBin // the cluster's build
			// The gateway under test is a client of the cluster, as the
			// jetstream target is: both reach NATS over loopback TCP.
			cfg.gatewayArgs = append(slices.Clone(cfg.gatewayArgs), "--replicas", strconv.Itoa(cfg.cluster))
		}
		g, err := spawnGateway(ctx, cfg, ext, b.log)
		if err != nil {
			return err
		}
		b.gw = g
		b.httpAddr, b.rpcAddr, b.sqsAddr, b.natsURL = g.httpAddr, g.rpcAddr, g.sqsAddr, g.natsURL
		b.gwPID = g.pid()
	} else {
		b.httpAddr, b.rpcAddr, b.sqsAddr, b.natsURL = cfg.httpAddr, cfg.rpcAddr, cfg.sqsAddr, cfg.natsURL
		b.gwPID, b.natsPID = cfg.gatewayPID, cfg.natsPID
	}
	if !cfg.noopInProcess && (slices.Contains(cfg.targets, tNoop) || slices.Contains(cfg.targets, tNoopRPC)) {
		p, err := startNoopProc(ctx, b.cfg.serverProcs)
		if err != nil {
			return err
		}
		b.noop = p
	}
	// Baselines first, so that a long run shows them before the gateway rows.
	for _, name := range []string{tNoop, tNoopRPC, tJS, tBeanstalkd, tHTTP, tRPC, tSQS} {
		if !slices.Contains(cfg.targets, name) {
			continue
		}
		if why := b.unreachable(name); why != "" {
			b.skip(name, why)
			continue
		}
		var t target
		var err error
		switch name {
		case tNoop:
			if b.noop != nil {
				t = newChildNoopHTTPTarget(b.noop, maxConc)
			} else {
				t, err = newNoopHTTPTarget(maxConc)
			}
		case tNoopRPC:
			if b.noop != nil {
				t = newChildNoopRPCTarget(b.noop, cfg.rpcDepth)
			} else {
				t, err = newNoopRPCTarget(cfg.rpcDepth)
			}
		case tBeanstalkd:
			bin, lerr := lookBeanstalkd(b.pathEnv)
			if lerr != nil {
				b.skip(name, lerr.Error())
				continue
			}
			p, serr := startBeanstalkd(ctx, bin, b.largestMessage(), b.log)
			if serr != nil {
				if ctx.Err() != nil {
					return serr
				}
				// A beanstalkd that does not run must not cost the
				// gateway's figures (it is in the default targets).
				b.skip(name, firstLine(serr.Error()))
				continue
			}
			b.beanstalkd = p
			t = newBeanstalkdTarget(p)
		case tJS:
			replicas := 1
			if cfg.cluster > 0 {
				replicas = cfg.cluster
			}
			t, err = newJSTarget(b.natsURL, cfg.jsConns, replicas)
		case tHTTP:
			t = newGatewayHTTPTarget(b.httpAddr, maxConc)
		case tRPC:
			t = newRPCTarget(b.rpcAddr, cfg.rpcDepth)
		case tSQS:
			t = newSQSTarget(b.sqsAddr, cfg.sqsAccount, maxConc)
		}
		if err != nil {
			return err
		}
		b.targets = append(b.targets, t)
	}
	if len(b.targets) == 0 {
		return errors.New("no target can run (give --http/--rpc/--sqs/--nats, or spawn)")
	}
	return nil
}

// startCluster starts the three-node cluster of --cluster 3 (building the
// gateway binary first unless --gateway-bin names one, so that the gateway
// under test is the same build) and returns how to reach its nodes.
func (b *bench) startCluster(ctx context.Context) (*extNATS, error) {
	bin := b.cfg.gatewayBin
	if bin == "" {
		dir, err := os.MkdirTemp("", "lmq-bench-")
		if err != nil {
			return nil, fmt.Errorf("temp dir: %w", err)
		}
		b.clusterDir = dir
		if bin, err = buildGateway(ctx, dir, b.log); err != nil {
			return nil, err
		}
		b.cfg.gatewayBin = bin
	}
	nodes, err := spawnClusterRetry(ctx, b.cfg, bin, b.log)
	if err != nil {
		return nil, err
	}
	b.clusterNodes = nodes
	// spawnCluster gives every node the same user and password.
	ext := &extNATS{user: "lmq", pass: nodes[0].natsPass}
	hosts := make([]string, len(nodes))
	urls := make([]string, len(nodes))
	for i, g := range nodes {
		hosts[i] = "nats://" + g.natsAddr
		urls[i] = g.natsURL
	}
	ext.hosts, ext.url = strings.Join(hosts, ","), strings.Join(urls, ",")
	b.log.Info("cluster ready", "nodes", ext.hosts)
	return ext, nil
}

// clusterPIDs are the processes of the --cluster nodes (none without).
func (b *bench) clusterPIDs() []int {
	var pids []int
	for _, g := range b.clusterNodes {
		if pid := g.pid(); pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (b *bench) stopCluster() {
	for _, g := range b.clusterNodes {
		g.stop()
	}
	if b.clusterDir != "" && !b.cfg.keep {
		if err := os.RemoveAll(b.clusterDir); err != nil {
			b.log.Warn("removing temp dir", "dir", b.clusterDir, "err", err)
		}
	}
}

// servedByGateway says whether target name measures the gateway or its NATS
// (and so needs one spawned or given), as opposed to the ceilings and
// beanstalkd, which the bench starts itself.
func servedByGateway(name string) bool {
	switch name {
	case tNoop, tNoopRPC, tBeanstalkd:
		return false
	}
	return true
}

// largestMessage is the largest body any selected workload pushes (for
// beanstalkd's maximum job size).
func (b *bench) largestMessage() int {
	n := max(slices.Max(b.cfg.sizes), memMsgSize)
	if b.cfg.has(wMaxRate) {
		n = max(n, b.cfg.maxRateSize)
	}
	return n
}

// unreachable says why target name cannot be measured (the address of the
// server it measures was not given), or "" when it can.
func (b *bench) unreachable(name string) string {
	switch {
	case name == tJS && b.natsURL == "":
		return "no --nats URL"
	case name == tHTTP && b.httpAddr == "":
		return "no --http address"
	case name == tRPC && b.rpcAddr == "":
		return "no --rpc address"
	case name == tSQS && b.sqsAddr == "":
		if b.gw != nil {
			return "the spawned gateway serves no SQS API (no --sqs-listen)"
		}
		return "no --sqs address"
	}
	return ""
}

func (b *bench) skip(target, why string) {
	b.log.Warn("skipping target", "target", target, "why", why)
	b.notes = append(b.notes, fmt.Sprintf("target %s skipped: %s", target, why))
}

// measure runs the selected workloads, in an order that lets each reuse the
// queues the previous one left: push fills, pull drains, mixed runs on the
// drained queues.
func (b *bench) measure(ctx context.Context) error {
	cfg := b.cfg
	if cfg.has(wPush) || cfg.has(wPull) || cfg.has(wMixed) {
		for qi, nq := range cfg.queues {
			if err := b.matrix(ctx, nq, qi == 0); err != nil {
				return err
			}
		}
	}
	if cfg.has(wE2E) {
		for _, nq := range cfg.e2eQueues {
			if err := b.e2eSeries(ctx, nq); err != nil {
				return err
			}
		}
	}
	if cfg.has(wMaxRate) {
		for _, t := range b.targets {
			if !t.stateful() {
				continue
			}
			if err := b.maxRate(ctx, t); err != nil {
				return err
			}
		}
	}
	if cfg.has(wMemory) {
		if b.beanstalkd != nil {
			b.notes = append(b.notes, "memory: beanstalkd not measured (the workload fills the gateway and its NATS)")
		}
		if err := b.memory(ctx); err != nil {
			return err
		}
	}
	// Last: it restarts a spawned gateway for every run.
	if cfg.has(wGroups) {
		if err := b.groupsSeries(ctx); err != nil {
			return err
		}
	}
	return nil
}

// matrix runs push, pull and mixed over sizes and concurrencies with nq
// queues per target. Up to --interleave-queues queues, every target has its
// queues at once and the targets take turns cell by cell, so that their
// ratios are taken minutes apart at most on a machine whose load changes;
// beyond, one target at a time holds its queues (thousands of streams per
// target would otherwise weigh on the others' figures).
func (b *bench) matrix(ctx context.Context, nq int, first bool) error {
	var ts []target
	for _, t := range b.targets {
		// The ceiling keeps no queues: one queue count is enough.
		if t.stateful() || first {
			ts = append(ts, t)
		}
	}
	if nq > b.cfg.interleaveQueues {
		for _, t := range ts {
			if err := b.matrixOf(ctx, []target{t}, nq); err != nil {
				return err
			}
		}
		return nil
	}
	return b.matrixOf(ctx, ts, nq)
}

func (b *bench) matrixOf(ctx context.Context, ts []target, nq int) error {
	cfg := b.cfg
	sets := make([]*queueSet, len(ts))
	for i, t := range ts {
		qs, err := b.createQueues(ctx, t, fmt.Sprintf("q%d", nq), nq)
		if err != nil {
			return err
		}
		sets[i] = qs
		defer b.removeQueues(ctx, t, qs)
	}
	for _, size := range cfg.sizes {
		for _, c := range cfg.conc {
			// Repetitions take turns too, so each target's median is
			// taken across the same stretch of time as the others'.
			runs := make([][]cellResult, len(ts))
			for range cfg.repeat {
				for i, t := range ts {
					if s, ok := t.(sizer); ok {
						if err := s.setSize(ctx, size); err != nil {
							b.keepMedians(runs)
							return fmt.Errorf("%s: setting the pull size: %w", t.name(), err)
						}
					}
					rs, err := b.cellGroup(ctx, t, sets[i], c, size)
					runs[i] = append(runs[i], rs...)
					if err != nil {
						b.keepMedians(runs)
						return err
					}
				}
			}
			b.keepMedians(runs)
		}
	}
	return nil
}

// keepMedians records, per target and workload, the repetition with the
// median rate (all of them when there is one).
func (b *bench) keepMedians(runs [][]cellResult) {
	for _, rs := range runs {
		for _, w := range []string{wPush, wPull, wMixed} {
			var same []cellResult
			for _, r := range rs {
				if r.workload == w {
					same = append(same, r)
				}
			}
			if len(same) == 0 {
				continue
			}
			slices.SortStableFunc(same, func(x, y cellResult) int { return cmp.Compare(x.rate, y.rate) })
			m := same[(len(same)-1)/2]
			if len(same) > 1 {
				for _, r := range same {
					m.repRates = append(m.repRates, r.rate)
				}
			}
			b.cells = append(b.cells, m)
		}
	}
}

// cellGroup runs, on one queue set, push (which fills), pull (which drains)
// and mixed, emptying the queues after each. It returns the cells of the
// selected workloads (push runs unreported when only pull is selected).
func (b *bench) cellGroup(ctx context.Context, t target, qs *queueSet, c, size int) ([]cellResult, error) {
	cfg := b.cfg
	var out []cellResult
	// run runs one cell and keeps it for the report when report says so.
	run := func(cell func(context.Context, target, *queueSet, int, int) (cellResult, error), report bool) error {
		r, err := cell(ctx, t, qs, c, size)
		if err == nil && report {
			out = append(out, b.measured(t, r))
		}
		return err
	}
	if cfg.has(wPush) || cfg.has(wPull) {
		if err := run(b.pushCell, cfg.has(wPush)); err != nil {
			return out, err
		}
	}
	if cfg.has(wPull) {
		if err := run(b.pullCell, true); err != nil {
			return out, err
		}
	}
	if err := b.drain(ctx, t, qs); err != nil {
		return out, err
	}
	if cfg.has(wMixed) {
		if err := run(b.mixedCell, true); err != nil {
			return out, err
		}
		if err := b.drain(ctx, t, qs); err != nil {
			return out, err
		}
	}
	return out, nil
}

// measured completes a cell of t just run (server RSS now) and logs it.
func (b *bench) measured(t target, r cellResult) cellResult {
	r.srvRSS = b.targetRSS(t)
	b.log.Info("cell",
		"workload", r.workload, "target", r.target, "C", r.conc, "size", r.size, "queues", r.queues,
		"msgs", r.msgs, "rate", fmtRate(r.rate), "p50", fmtDur(r.lat.p50), "p99", fmtDur(r.lat.p99),
		"errors", r.errors)
	return r
}

// createQueues makes nq queues exist on t (timed, for the queues table).
func (b *bench) createQueues(ctx context.Context, t target, tag string, nq int) (*queueSet, error) {
	qs := newQueueSet(fmt.Sprintf("lmqb-%s-%s-%s", b.runID, t.name(), tag), nq)
	if !t.stateful() {
		return qs, nil
	}
	start := time.Now()
	err := parallel(ctx, nq, b.cfg.setupConc, func(ctx context.Context, i int) error {
		return t.setup(ctx, qs.names[i])
	})
	if err != nil {
		return nil, fmt.Errorf("%s: creating %d queues: %w", t.name(), nq, err)
	}
	el := time.Since(start)
	b.setups = append(b.setups, setupResult{target: t.name(), queues: nq, create: el})
	b.log.Info("queues created", "target", t.name(), "queues", nq, "took", el.Round(time.Millisecond))
	return qs, nil
}

// removeQueues deletes a queue set; failures only warn, the run goes on.
func (b *bench) removeQueues(ctx context.Context, t target, qs *queueSet) {
	if !t.stateful() || ctx.Err() != nil {
		return
	}
	start := time.Now()
	err := parallel(ctx, len(qs.names), b.cfg.setupConc, func(ctx context.Context, i int) error {
		return t.remove(ctx, qs.names[i])
	})
	el := time.Since(start)
	if err != nil {
		b.log.Warn("removing queues", "target", t.name(), "err", err)
		return
	}
	// Record the delete time next to the matching creation.
	for i := len(b.setups) - 1; i >= 0; i-- {
		if s := &b.setups[i]; s.target == t.name() && s.queues == len(qs.names) && s.remove == 0 {
			s.remove = el
			break
		}
	}
}

// checkAlive turns a dead spawned gateway, beanstalkd or ceilings process
// into an error.
func (b *bench) checkAlive() error {
	if err := b.gw.alive(); err != nil {
		return err
	}
	if err := b.noop.alive(); err != nil {
		return err
	}
	return b.beanstalkd.alive()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// serverCPU is the CPU time so far of the processes serving target t: the
// gateway (which embeds NATS when spawned) and a separate nats-server,
// beanstalkd, or the ceilings process. Zero when unknown (the ceilings run
// inside the bench; remote without PIDs).
func (b *bench) serverCPU(t target) time.Duration {
	if !t.stateful() {
		if pid := b.ceilingPID(t); pid > 0 {
			if d, err := procCPU(pid); err == nil {
				return d
			}
		}
		return 0
	}
	var total time.Duration
	for _, pid := range b.serverPIDs(t) {
		if d, err := procCPU(pid); err == nil {
			total += d
		}
	}
	return total
}

// targetRSS is the RSS of the processes serving target t now: beanstalkd's
// for beanstalkd, the ceilings process's for a ceiling (none inside the
// bench), else serverRSS.
func (b *bench) targetRSS(t target) int64 {
	if !t.stateful() {
		if pid := b.ceilingPID(t); pid > 0 {
			rss, _, _ := procRSS(pid)
			return rss
		}
		return 0
	}
	if bt, ok := t.(*beanstalkdTarget); ok {
		rss, _, _ := procRSS(bt.proc.pid())
		return rss
	}
	return b.serverRSS()
}

// ceilingPID is the PID of the process serving ceiling t: the ceilings
// child, or 0 when t is no ceiling or runs inside the bench.
func (b *bench) ceilingPID(t target) int {
	if !isCeiling(t.name()) {
		return 0
	}
	return b.noop.pid()
}

// serverRSS is the RSS of the gateway and of a separate nats-server now.
func (b *bench) serverRSS() int64 {
	pids := []int{b.gwPID}
	if b.natsPID != b.gwPID {
		pids = append(pids, b.natsPID)
	}
	pids = append(pids, b.clusterPIDs()...)
	var total int64
	for _, pid := range pids {
		if pid <= 0 {
			continue
		}
		if rss, _, err := procRSS(pid); err == nil {
			total += rss
		}
	}
	return total
}

func (b *bench) serverPIDs(t target) []int {
	if bt, ok := t.(*beanstalkdTarget); ok {
		return []int{bt.proc.pid()}
	}
	if len(b.clusterNodes) > 0 {
		// The nodes do JetStream's work for every target; the gateway
		// under test is a cost of its own rows only.
		pids := b.clusterPIDs()
		if t.name() != tJS && b.gwPID > 0 {
			pids = append(pids, b.gwPID)
		}
		return pids
	}
	separateNATS := b.natsPID > 0 && b.natsPID != b.gwPID
	var pids []int
	// Raw JetStream does not pass through the gateway; when NATS runs
	// separately, the gateway's CPU is not part of that target's cost.
	if b.gwPID > 0 && !(t.name() == tJS && separateNATS) {
		pids = append(pids, b.gwPID)
	}
	if separateNATS {
		pids = append(pids, b.natsPID)
	}
	return pids
}
