package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Target and workload names, as given to --targets and --workloads.
const (
	tNoop       = "noop-http"
	tNoopRPC    = "noop-rpc"
	tJS         = "jetstream"
	tBeanstalkd = "beanstalkd"
	tHTTP       = "http"
	tRPC        = "rpc"
	tSQS        = "sqs"

	wPush    = "push"
	wPull    = "pull"
	wMixed   = "mixed"
	wE2E     = "e2e"
	wMaxRate = "maxrate"
	wMemory  = "memory"
)

// knownWorkloads also has those that never run by default (queues, which
// runs alone on gateways of its own; groups, which restarts the gateway
// for every run).
var knownWorkloads = append(slices.Clone(allWorkloads), wQueues, wGroups)

var (
	allTargets   = []string{tNoop, tNoopRPC, tJS, tBeanstalkd, tHTTP, tRPC, tSQS}
	allWorkloads = []string{wPush, wPull, wMixed, wE2E, wMaxRate, wMemory}
)

// config is everything the flags say.
type config struct {
	args []string // the command line, for the report

	targets   []string
	workloads []string
	conc      []int
	sizes     []int
	queues    []int
	duration  time.Duration

	// Deployment: spawn a gateway, or use addresses of a running one.
	spawn       bool
	gatewayBin  string
	gatewayArgs []string
	keep        bool
	profileDir  string // CPU profiles of the spawned gateway, one per cell ("": none)
	httpAddr    string
	rpcAddr     string
	sqsAddr     string
	sqsAccount  string
	natsURL     string
	gatewayPID  int
	natsPID     int
	// cluster: 3 runs the jetstream and gateway targets on a three-node
	// cluster the bench starts (R3); 0: on the spawned gateway's single node.
	cluster int

	// Target tuning.
	noopInProcess bool // the ceilings inside the bench, not in a child process
	serverProcs   int  // GOMAXPROCS of the spawned servers (0: Go's default)
	rpcDepth      int
	jsConns       int
	pullWait      time.Duration

	// e2e and max-rate search.
	e2eRates         []float64
	e2eQueues        []int
	maxRateConc      int
	maxRateSize      int
	maxRateStart     float64
	maxRateMax       float64
	maxRateP99       time.Duration
	maxRateSteps     int
	maxRateTrialD    time.Duration
	e2eGrace         time.Duration
	memMsgs          int
	memSamples       int
	memConc          int
	setupConc        int
	drainTimeout     time.Duration
	out              string
	verbose          bool
	quick            bool
	explicitlySet    map[string]bool
	logLevel         slog.Level
	memIdle          time.Duration
	interleaveQueues int
	repeat           int

	// The queues workload (manyqueues.go).
	mqQueues        int
	mqActive        int
	mqClients       int
	mqBudget        time.Duration
	mqSamples       int
	mqRepeat        int
	mqClusterQueues int

	// The groups workload (groups.go).
	groupCounts    []int
	groupsMsgs     int
	groupsConc     int
	groupsBudget   time.Duration
	groupsPullWait time.Duration
}

const usageHead = `lmq-bench measures lmq-gateway (HTTP and MessagePack-RPC) against raw
JetStream on the same NATS server, against no-op HTTP and MessagePack-RPC
servers (the protocols' ceilings) and against beanstalkd, and prints markdown
tables (msgs/s, latency percentiles, ratios), machine facts and the command
line.

Usage:
  lmq-bench [flags]                       spawn a gateway and bench it (default)
  lmq-bench --http 127.0.0.1:9980 --rpc 127.0.0.1:18800 --nats nats://127.0.0.1:4222
                                          bench a running deployment
  lmq-bench --quick                       seconds-long smoke run of everything

Targets (--targets):
  http        the gateway's HTTP API: POST /messages/NAME; GET /messages/NAME?t=W
              then POST /messages/NAME/ID?reply=ack
  rpc         MessagePack-RPC push/pull/done, one TCP connection per client,
              --rpc-depth requests in flight per connection
  sqs         the gateway's Amazon SQS API, AWS JSON 1.0 by hand, unsigned:
              SendMessage; ReceiveMessage (MaxNumberOfMessages 1, waits in
              whole seconds) then DeleteMessage; queues made by CreateQueue.
              Bodies carry their 8-byte stamp as 16 hex digits (8 bytes more).
              Skipped when the gateway serves no SQS API
  jetstream   raw nats.go on the gateway's NATS: WorkQueue stream + durable pull
              consumer per queue; sync Publish; Fetch(1) + DoubleAck
  noop-http   a no-op net/http handler (loopback), same HTTP client code: the
              HTTP ceiling
  noop-rpc    a no-op MessagePack-RPC server (loopback), driven by the rpc
              target's client code (same framing, same --rpc-depth): answers
              push and done "ok" and every pull at once with a message of the
              cell's size. The RPC ceiling. Like noop-http it keeps no queues:
              one queue count, no e2e/maxrate
              Both ceilings run in a child process of the bench (the bench's
              executable re-run; it ends with the bench), as the gateway and
              beanstalkd run in their own: a request crossing to another
              process pays wake-ups that two goroutines of one process do
              not, so a ceiling inside the bench would be optimistic. Their
              srv CPU and RSS are that process's. --noop-in-process runs them
              inside the bench instead (no srv figures)
  beanstalkd  beanstalkd started by the bench when found in PATH (else skipped
              with a note): beanstalkd -l 127.0.0.1 -p PORT -b TMPDIR -z SIZE
              (binlog on, fsync at most every 50 ms as by default; SIZE the
              largest message, at least the default 65535), stopped and its
              directory removed at the end. Its text protocol by hand, one
              connection per client, one request at a time: use + put; watch
              + reserve-with-timeout (whole seconds, rounded down; waits under
              a second polled every 2 ms) then delete; a tube per queue. Push, pull, mixed, e2e and maxrate; not memory
              or groups. Server CPU and RSS are beanstalkd's

Replicated cluster (--cluster 3): the bench starts a three-node JetStream
cluster on loopback (three gateway processes whose embedded nats-servers form
it, --replicas 3; they serve nothing to the bench) and runs jetstream, http,
rpc and sqs on it instead of the single node: jetstream makes its streams and
consumers R3 and connects to the three nodes' URLs; http, rpc and sqs measure
one more spawned gateway started with --nats-url (the three nodes) and
--replicas 3, so that both reach NATS over TCP. Their rows' "vs jetstream"
ratios then read gateway R3 against raw JetStream R3; srv CPU and RSS are
the nodes' processes, with the gateway under test on its rows. The ceilings and
beanstalkd stay as they are. Workloads push, pull, mixed, e2e and maxrate
(memory and groups restart the gateway, and are left out).

Push, pull and mixed tables give each row's ratio to jetstream; http and rpc
rows also to their ceiling (vs noop-http, vs noop-rpc), to the sum of parts
1/(1/ceiling + 1/jetstream) and to beanstalkd in the same cell.

Workloads (--workloads):
  push     closed loop: each client pushes and waits for the answer
  pull     pull+ack draining what push left (push runs unreported if not selected)
  mixed    C pushers and C pullers at once; latency is push->pull
  e2e      open loop at each --e2e-rate: p50/p99/p999 of pull time minus the
           scheduled push time, and the delivered rate
  maxrate  search the highest offered rate with p99 <= --maxrate-p99
  memory   RSS of the gateway (and of NATS if separate) while --mem-msgs
           messages of 256 B pile up in one queue, sampled as it grows;
           jetstream and one gateway front end (http, else rpc)
  groups   (not in the default) ordered groups: for each --groups count, a
           fresh queue, --groups-msgs pushes (message i in group i mod G),
           RSS per waiting group, then pull+ack throughput, every delivery
           checked for per-group order; http and rpc targets only
  queues   (not in the default; runs alone) what many queues cost

Every push/pull/mixed cell runs for each concurrency, size and queue count;
clients are spread over the queues (client w uses queues j with j%C == w, or
queue w%Q when there are fewer queues than clients).

Flags:
`

// parseFlags parses args into a config. It returns flag.ErrHelp after
// printing the usage for -h/--help.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := config{args: args}
	fs := flag.NewFlagSet("lmq-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHead)
		fs.PrintDefaults()
	}

	targets := fs.String("targets", strings.Join(allTargets, ","), "targets to bench, comma-separated: "+strings.Join(allTargets, ", "))
	workloads := fs.String("workloads", strings.Join(allWorkloads, ","), "workloads, comma-separated: "+strings.Join(allWorkloads, ", ")+", groups (not in the default); or queues alone (not in the default)")
	conc := fs.String("conc", "1,16,64", "concurrent clients per cell, comma-separated")
	sizes := fs.String("sizes", "256,64KiB", "message sizes in bytes (K/KiB/M/MiB suffixes allowed), comma-separated")
	queues := fs.String("queues", "1,100,10000", "queue counts for push, pull and mixed, comma-separated")
	fs.DurationVar(&cfg.duration, "duration", 5*time.Second, "duration of each measured cell")
	fs.IntVar(&cfg.repeat, "repeat", 1, "run push/pull/mixed cells and e2e trials this many times (targets taking turns) and report the median (by rate; by p99 for e2e)")

	fs.BoolVar(&cfg.spawn, "spawn", true, "build and start a gateway on free loopback ports with a temporary data dir (off when --http, --rpc, --sqs or --nats is given)")
	fs.StringVar(&cfg.gatewayBin, "gateway-bin", "", "gateway binary to spawn (default: go build ./cmd/lmq-gateway once into a temp dir)")
	gwArgs := fs.String("gateway-args", "", "extra arguments for the spawned gateway, space-separated")
	fs.IntVar(&cfg.serverProcs, "server-procs", 0, "GOMAXPROCS of the processes the bench spawns (the gateway with its embedded NATS, and the ceilings' child process), 0: Go's default (every core). On a machine the bench's clients share, 1 spares the cores the idle threads' spinning and wake-ups (beanstalkd has one thread)")
	fs.BoolVar(&cfg.noopInProcess, "noop-in-process", false, "run the ceilings (noop-http, noop-rpc) inside the bench instead of in a child process (optimistic: no cross-process wake-ups)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the spawned gateway's temp dir (data, log) after the run")
	fs.StringVar(&cfg.profileDir, "profile", "", "save a CPU profile of the spawned gateway for each measured push/pull/mixed cell and e2e/maxrate trial into `DIR`, named workload-target-cC-sSIZE-qQUEUES[-rRATE].pprof (read with go tool pprof -top FILE), and print each profiled cell's CPU per message by owner (nats-server, nats.go client, gateway core, front end, Go runtime) and kind of work (code, alloc, GC, scheduler, kernel), read back with go tool pprof -traces; the gateway is started with --debug-listen on a loopback port; needs spawn mode")
	fs.StringVar(&cfg.httpAddr, "http", "", "HTTP address of a running gateway (host:port)")
	fs.StringVar(&cfg.rpcAddr, "rpc", "", "MessagePack-RPC address of a running gateway (host:port)")
	fs.StringVar(&cfg.sqsAddr, "sqs", "", "Amazon SQS API address of a running gateway (host:port; its --sqs-listen), without authentication")
	fs.StringVar(&cfg.sqsAccount, "sqs-account", sqsDefaultAccount, "account id in the SQS target's queue URLs (the gateway's --sqs-account)")
	fs.IntVar(&cfg.cluster, "cluster", 0, "3: run the jetstream, http, rpc and sqs targets on a three-node loopback cluster the bench starts, R3 (see above); 0: on one node. Needs spawn mode; leaves out the memory workload by default")
	fs.StringVar(&cfg.natsURL, "nats", "", "NATS URL for the jetstream target against a running deployment")
	fs.IntVar(&cfg.gatewayPID, "gateway-pid", 0, "PID of the running gateway, for RSS and CPU figures (spawn mode knows it)")
	fs.IntVar(&cfg.natsPID, "nats-pid", 0, "PID of a separate nats-server, for RSS and CPU figures")

	fs.IntVar(&cfg.rpcDepth, "rpc-depth", 1, "requests in flight per RPC connection (pipelining); 1 keeps C operations in flight, like the other targets")
	fs.IntVar(&cfg.jsConns, "js-conns", 1, "NATS connections shared by the jetstream target's clients (the gateway also shares one)")
	fs.DurationVar(&cfg.pullWait, "pull-wait", time.Second, "long-poll wait of pulls that expect to wait (mixed, e2e)")

	rates := fs.String("e2e-rate", "2000", "offered rates (msgs/s) of the e2e workload, comma-separated")
	e2eQueues := fs.String("e2e-queues", "1", "queue counts of the e2e workload, comma-separated")
	fs.DurationVar(&cfg.e2eGrace, "e2e-grace", 2*time.Second, "how long e2e pullers keep pulling after the offered window")
	fs.IntVar(&cfg.maxRateConc, "maxrate-conc", 16, "pushers and pullers of the max-rate search")
	maxRateSize := fs.String("maxrate-size", "256", "message size of the max-rate search")
	fs.Float64Var(&cfg.maxRateStart, "maxrate-start", 2000, "first offered rate of the max-rate search (doubled until it fails)")
	fs.Float64Var(&cfg.maxRateMax, "maxrate-max", 200000, "highest offered rate tried")
	fs.DurationVar(&cfg.maxRateP99, "maxrate-p99", 20*time.Millisecond, "p99 bound of the max-rate search")
	fs.IntVar(&cfg.maxRateSteps, "maxrate-steps", 4, "bisection steps after the first failing rate")
	fs.DurationVar(&cfg.maxRateTrialD, "maxrate-duration", 0, "duration of each max-rate trial (default: --duration)")

	fs.IntVar(&cfg.memMsgs, "mem-msgs", 1_000_000, "backlog of 256-byte messages for the memory workload")
	fs.IntVar(&cfg.memSamples, "mem-samples", 10, "RSS samples as the backlog grows")
	fs.IntVar(&cfg.memConc, "mem-conc", 64, "pushers filling the memory backlog")
	fs.DurationVar(&cfg.memIdle, "mem-idle", 2*time.Second, "memory and groups: idle time before the baseline, after the fill and after deleting the queue")
	fs.IntVar(&cfg.interleaveQueues, "interleave-queues", 1000, "up to this many queues per target, targets take turns cell by cell (fairer ratios on a machine with changing load); above, one target at a time")
	fs.IntVar(&cfg.setupConc, "setup-conc", 16, "parallel requests when creating and deleting queues")
	fs.DurationVar(&cfg.drainTimeout, "drain-timeout", 60*time.Second, "bound on emptying queues between cells")
	fs.IntVar(&cfg.mqQueues, "mq-queues", 10_000, "queues: how many queues to create (one 256-byte message each)")
	fs.IntVar(&cfg.mqActive, "mq-active", 1000, "queues: queues put in active use at once (a waiting pull on each, then push and pull+ack cells across them)")
	fs.IntVar(&cfg.mqClients, "mq-clients", 16, "queues: concurrent clients creating, draining and in the push/pull cells")
	fs.DurationVar(&cfg.mqBudget, "mq-budget", 240*time.Second, "queues: time budget of each phase (creation, each listing, stop, restart, drain, pull-any); a phase that runs out reports how far it got")
	fs.IntVar(&cfg.mqSamples, "mq-samples", 20, "queues: pull-any latency samples")
	fs.IntVar(&cfg.mqRepeat, "mq-repeat", 3, "queues: timings of GET /stats, GET /queues and status (median; fewer when one run takes over half the budget)")
	fs.IntVar(&cfg.mqClusterQueues, "mq-cluster-queues", 2000, "queues: queues created on an embedded three-node cluster (--replicas 3) to count its Raft groups (0: skip the cluster)")
	groupCounts := fs.String("groups", "0,1,100,10000", "groups: group counts, comma-separated, one fresh queue each (0: the same queue without groups)")
	fs.IntVar(&cfg.groupsMsgs, "groups-msgs", 20_000, "groups: messages of 256 B pushed, then drained, per group count")
	fs.IntVar(&cfg.groupsConc, "groups-conc", 16, "groups: concurrent clients pushing, and then pulling+acking")
	fs.DurationVar(&cfg.groupsBudget, "groups-budget", 300*time.Second, "groups: time budget of each push and drain phase; a phase that runs out reports how far it got")
	fs.DurationVar(&cfg.groupsPullWait, "groups-pull-wait", time.Second, "groups: long-poll wait of each pull of the drain (a group's next message wakes a waiting pull)")
	fs.StringVar(&cfg.out, "out", "", "also write the markdown report to this file")
	fs.BoolVar(&cfg.verbose, "v", false, "debug logging")
	fs.BoolVar(&cfg.quick, "quick", false, "seconds-long smoke run: short cells, small matrix, small backlog (explicit flags still win)")

	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.explicitlySet = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { cfg.explicitlySet[f.Name] = true })

	// --quick replaces the defaults the user did not override.
	if cfg.quick {
		quick := map[string]string{
			"conc": "1,4", "sizes": "256", "queues": "1,10", "duration": "250ms",
			"e2e-rate": "500", "maxrate-start": "1000", "maxrate-max": "4000", "maxrate-steps": "1",
			"maxrate-duration": "250ms", "maxrate-conc": "4", "mem-msgs": "5000",
			"mem-samples": "5", "e2e-grace": "500ms", "drain-timeout": "10s", "mem-idle": "300ms",
			"groups": "0,1,10", "groups-msgs": "300",
		}
		for name, v := range quick {
			if !cfg.explicitlySet[name] {
				if err := fs.Set(name, v); err != nil {
					return cfg, fmt.Errorf("quick default %s=%s: %w", name, v, err)
				}
			}
		}
	}

	var err error
	if cfg.targets, err = parseNames(*targets, allTargets); err != nil {
		return cfg, fmt.Errorf("--targets: %w", err)
	}
	if cfg.workloads, err = parseNames(*workloads, knownWorkloads); err != nil {
		return cfg, fmt.Errorf("--workloads: %w", err)
	}
	if cfg.has(wQueues) && len(cfg.workloads) > 1 {
		return cfg, errors.New("--workloads: queues runs alone (it spawns and restarts gateways of its own)")
	}
	if cfg.mqQueues < 1 || cfg.mqActive < 1 || cfg.mqClients < 1 || cfg.mqSamples < 1 || cfg.mqRepeat < 1 || cfg.mqClusterQueues < 0 || cfg.mqBudget <= 0 {
		return cfg, errors.New("--mq-* values must be positive (--mq-cluster-queues may be 0)")
	}
	if cfg.groupCounts, err = parseGroupCounts(*groupCounts); err != nil {
		return cfg, fmt.Errorf("--groups: %w", err)
	}
	if cfg.groupsMsgs < 1 || cfg.groupsConc < 1 || cfg.groupsBudget <= 0 || cfg.groupsPullWait < 0 {
		return cfg, errors.New("--groups-msgs, --groups-conc and --groups-budget must be positive (--groups-pull-wait >= 0)")
	}
	if cfg.conc, err = parseInts(*conc, parseInt); err != nil {
		return cfg, fmt.Errorf("--conc: %w", err)
	}
	if cfg.sizes, err = parseInts(*sizes, parseSize); err != nil {
		return cfg, fmt.Errorf("--sizes: %w", err)
	}
	if cfg.queues, err = parseInts(*queues, parseInt); err != nil {
		return cfg, fmt.Errorf("--queues: %w", err)
	}
	if cfg.e2eQueues, err = parseInts(*e2eQueues, parseInt); err != nil {
		return cfg, fmt.Errorf("--e2e-queues: %w", err)
	}
	if cfg.maxRateSize, err = parseSize(*maxRateSize); err != nil {
		return cfg, fmt.Errorf("--maxrate-size: %w", err)
	}
	for _, s := range splitList(*rates) {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || r <= 0 {
			return cfg, fmt.Errorf("--e2e-rate: %q is not a positive number", s)
		}
		cfg.e2eRates = append(cfg.e2eRates, r)
	}
	if *gwArgs != "" {
		cfg.gatewayArgs = strings.Fields(*gwArgs)
	}
	if cfg.maxRateTrialD == 0 {
		cfg.maxRateTrialD = cfg.duration
	}
	for _, s := range cfg.sizes {
		// The e2e timestamp and the sequence header need 16 bytes.
		if s < 16 {
			return cfg, fmt.Errorf("--sizes: %d is below the 16-byte minimum", s)
		}
	}
	switch {
	case cfg.duration <= 0:
		return cfg, errors.New("--duration must be positive")
	case cfg.repeat < 1:
		return cfg, errors.New("--repeat must be >= 1")
	case cfg.rpcDepth < 1 || cfg.jsConns < 1 || cfg.memConc < 1 || cfg.setupConc < 1 || cfg.maxRateConc < 1:
		return cfg, errors.New("--rpc-depth, --js-conns, --mem-conc, --setup-conc and --maxrate-conc must be >= 1")
	case cfg.memSamples < 1:
		return cfg, errors.New("--mem-samples must be >= 1")
	}
	// An address of a running deployment means: do not spawn.
	if cfg.httpAddr != "" || cfg.rpcAddr != "" || cfg.sqsAddr != "" || cfg.natsURL != "" {
		if cfg.explicitlySet["spawn"] && cfg.spawn {
			return cfg, errors.New("--spawn contradicts --http/--rpc/--sqs/--nats")
		}
		cfg.spawn = false
	}
	if cfg.profileDir != "" && !cfg.spawn {
		return cfg, errors.New("--profile needs the bench to spawn the gateway (no --http/--rpc/--nats)")
	}
	if err := checkCluster(&cfg); err != nil {
		return cfg, err
	}
	cfg.logLevel = slog.LevelInfo
	if cfg.verbose {
		cfg.logLevel = slog.LevelDebug
	}
	return cfg, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseNames(s string, known []string) ([]string, error) {
	var out []string
	for _, n := range splitList(s) {
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("unknown %q (known: %s)", n, strings.Join(known, ", "))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

func parseInts(s string, parse func(string) (int, error)) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := parse(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty list")
	}
	return out, nil
}

func parseInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q is not a positive integer", s)
	}
	return n, nil
}

// parseSize reads "256", "64K", "64KiB", "1M", "1MiB" (binary units).
func parseSize(s string) (int, error) {
	mult := 1
	num := s
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"K", 1 << 10}, {"M", 1 << 20}, {"k", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	return n * mult, nil
}

func (c config) has(workload string) bool { return slices.Contains(c.workloads, workload) }

// checkCluster validates --cluster and, when it is on, drops the memory
// workload from the default selection: memory (and groups) restart the
// gateway with an empty data dir, which does not empty a cluster it only
// connects to.
func checkCluster(cfg *config) error {
	switch cfg.cluster {
	case 0:
		return nil
	case 3:
	default:
		return fmt.Errorf("--cluster %d: want 0 (one node) or 3", cfg.cluster)
	}
	if !cfg.spawn {
		return errors.New("--cluster starts a cluster and gateways of its own: it does not go with --http/--rpc/--sqs/--nats")
	}
	for _, w := range []string{wMemory, wGroups, wQueues} {
		if !cfg.has(w) {
			continue
		}
		if cfg.explicitlySet["workloads"] {
			return fmt.Errorf("--cluster: the %s workload does not run on the cluster", w)
		}
		cfg.workloads = slices.DeleteFunc(cfg.workloads, func(s string) bool { return s == w })
	}
	return nil
}
