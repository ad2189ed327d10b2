package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/httpapi"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/rpc"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// startNATS runs an embedded JetStream server on a random loopback port,
// open to any client: the bench's jetstream target dials it by URL, as it
// would a deployment's.
func startNATS(t *testing.T) *embedded.Server {
	t.Helper()
	return testnats.StartWith(t, embedded.Options{
		Listen:     "127.0.0.1:0",
		ClientAuth: embedded.ClientAuth{None: true},
	})
}

// startGateway runs the gateway core with its HTTP and MessagePack-RPC front
// ends in this process, on loopback listeners, over the server s, reached
// in-process as the gateway reaches its embedded server.
func startGateway(t *testing.T, s *embedded.Server) (httpAddr, rpcAddr string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	nc, err := s.Connect("lmq-bench gateway")
	if err != nil {
		t.Fatalf("gateway nats connect: %v", err)
	}
	quiet := slog.New(slog.DiscardHandler)
	startCtx, startCancel := context.WithTimeout(ctx, 10*time.Second)
	defer startCancel()
	core, err := gateway.New(startCtx, bus.New(nc), gateway.Config{Logger: quiet})
	if err != nil {
		t.Fatalf("gateway core: %v", err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: httpapi.New(httpapi.CoreOf(core), httpapi.Options{Logger: quiet}), ReadHeaderTimeout: 5 * time.Second}
	rs := rpc.New(rpc.CoreOf(core), rpc.Options{Logger: quiet})
	go func() { _ = hs.Serve(hl) }()
	go func() { _ = rs.Serve(ctx, rl) }()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = hs.Shutdown(sctx)
		_ = rs.Shutdown(sctx)
		cancel()
		core.Close()
		nc.Close()
	})
	return hl.Addr().String(), rl.Addr().String()
}

// TestSmoke runs every workload briefly against every target, all started in
// this process: the no-op HTTP and RPC servers, raw JetStream on an
// in-process nats-server, and the gateway's HTTP and RPC front ends on that
// server; and beanstalkd when it is in PATH (else its skip is checked). It
// checks that messages were counted and the tables printed, and asserts
// nothing about speed.
func TestSmoke(t *testing.T) {
	t.Parallel()
	_, lookErr := lookBeanstalkd(os.Getenv("PATH"))
	haveBS := lookErr == nil
	s := startNATS(t)
	httpAddr, rpcAddr := startGateway(t, s)
	pid := strconv.Itoa(os.Getpid())
	args := []string{
		"--http", httpAddr, "--rpc", rpcAddr, "--nats", s.ClientURL(),
		// Everything serves from this process: its RSS and CPU are ours.
		"--gateway-pid", pid,
		// Two clients over three queues: client 0 owns two of them.
		"--conc", "2", "--sizes", "256", "--queues", "3",
		"--duration", "80ms", "--pull-wait", "200ms", "--rpc-depth", "2",
		"--e2e-rate", "300", "--e2e-grace", "300ms",
		"--maxrate-start", "300", "--maxrate-max", "300", "--maxrate-conc", "2",
		"--mem-msgs", "300", "--mem-samples", "3", "--mem-conc", "4", "--mem-idle", "10ms",
		"--setup-conc", "4",
	}
	b, report, logs := runBench(t, args, 60*time.Second)

	// push, pull, mixed for each of the five targets (six with beanstalkd);
	// e2e and maxrate on those that keep messages.
	targets, stateful := 5, 3
	if haveBS {
		targets, stateful = 6, 4
	}
	if want := 3 * targets; len(b.cells) != want {
		t.Errorf("got %d cells, want %d", len(b.cells), want)
	}
	for _, c := range b.cells {
		if c.msgs <= 0 || c.errors > 0 {
			t.Errorf("cell %s %s: %d msgs, %d errors (%s)", c.workload, c.target, c.msgs, c.errors, c.firstErr)
		}
	}
	if len(b.e2es) != stateful {
		t.Errorf("got %d e2e results, want %d (jetstream, http, rpc, beanstalkd if found)", len(b.e2es), stateful)
	}
	for _, r := range b.e2es {
		if r.sent == 0 || r.lat.n == 0 || r.errors > 0 {
			t.Errorf("e2e %s: sent %d, %d latency samples, %d errors (%s)", r.target, r.sent, r.lat.n, r.errors, r.firstErr)
		}
	}
	if len(b.maxRates) != stateful {
		t.Errorf("maxrate: %d results, want %d", len(b.maxRates), stateful)
	}
	if len(b.mems) != 2 {
		t.Errorf("memory: %d fills, want 2 (jetstream, http)", len(b.mems))
	}
	for _, m := range b.mems {
		if len(m.samples) < 3 || m.samples[0].rss <= 0 || m.errors > 0 {
			t.Errorf("memory %s: %+v", m.target, m)
		}
	}
	wants := []string{
		"# lmq-bench run", "- machine:", "- command: `go run ./tools/lmq-bench --http 127.0.0.1:",
		"## Push", "## Pull + ack", "## Push and pull + ack at once", "## End-to-end latency",
		"## Highest offered rate", "## Memory", "## Queue creation",
		"| noop-http | 2 | 256 B | — |", "| noop-rpc | 2 | 256 B | — |",
		"| jetstream | 2 | 256 B | 3 |", "| http | 2 | 256 B | 3 |", "| rpc | 2 | 256 B | 3 |",
		"| vs noop-http | vs noop-rpc | vs parts | vs beanstalkd |",
		"- ceilings: noop-http 127.0.0.1:", "in a child process of the bench (pid ",
	}
	if haveBS {
		wants = append(wants, "| beanstalkd | 2 | 256 B | 3 |", "- beanstalkd: started by the bench", "memory: beanstalkd not measured")
	} else {
		wants = append(wants, "target beanstalkd skipped: beanstalkd not found in PATH")
	}
	for _, want := range wants {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("report:\n%s\nlogs:\n%s", report, logs)
	}
}

func TestAssigned(t *testing.T) {
	qs := newQueueSet("q", 5)
	if got := qs.assigned(1, 2); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("5 queues, client 1 of 2: %v", got)
	}
	if got := qs.assigned(6, 8); !slices.Equal(got, []int{1}) {
		t.Errorf("5 queues, client 6 of 8: %v", got)
	}
	p := percentilesOf([]time.Duration{5, 1, 4, 2, 3})
	if p.p50 != 3 || p.p99 != 5 || p.n != 5 {
		t.Errorf("percentiles: %+v", p)
	}
}

func TestFlags(t *testing.T) {
	if _, err := parseFlags([]string{"--help"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
	if _, err := parseFlags([]string{"--targets", "nope"}, io.Discard); err == nil {
		t.Error("unknown target accepted")
	}
	cfg, err := parseFlags([]string{"--quick", "--conc", "2", "--http", "127.0.0.1:1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.spawn || cfg.conc[0] != 2 || cfg.duration != 250*time.Millisecond {
		t.Errorf("quick/explicit/remote: spawn=%v conc=%v duration=%v", cfg.spawn, cfg.conc, cfg.duration)
	}
	// --profile reads the spawned gateway's pprof: a running one has none.
	if _, err := parseFlags([]string{"--profile", t.TempDir(), "--http", "127.0.0.1:1"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--profile") {
		t.Errorf("--profile with --http: %v, want an error naming --profile", err)
	}
	if n, err := parseSize("64KiB"); err != nil || n != 65536 {
		t.Errorf("parseSize(64KiB) = %d, %v", n, err)
	}
}

func TestMedians(t *testing.T) {
	b := &bench{}
	rs := []cellResult{
		{workload: wPush, target: tJS, rate: 30}, {workload: wPull, target: tJS, rate: 5},
		{workload: wPush, target: tJS, rate: 10}, {workload: wPull, target: tJS, rate: 7},
		{workload: wPush, target: tJS, rate: 20}, {workload: wPull, target: tJS, rate: 6},
	}
	b.keepMedians([][]cellResult{rs})
	if len(b.cells) != 2 || b.cells[0].rate != 20 || b.cells[1].rate != 6 || len(b.cells[0].repRates) != 3 {
		t.Errorf("medians: %+v", b.cells)
	}
	m := medianE2E([]e2eResult{{lat: percentiles{p99: 3}}, {lat: percentiles{p99: 1}}, {lat: percentiles{p99: 2}}})
	if m.lat.p99 != 2 || len(m.repP99) != 3 {
		t.Errorf("e2e median: %+v", m)
	}
}

// TestCluster runs push and pull+ack briefly on the replicated cluster of
// --cluster 3: raw JetStream R3 and the gateway's HTTP and RPC front ends on
// a gateway spawned with --nats-url and --replicas 3. It checks that every
// cell delivered messages without errors and that the report names the
// cluster; it asserts nothing about speed.
func TestCluster(t *testing.T) {
	if testing.Short() {
		// Builds the gateway binary and starts four gateway processes, three
		// of them forming a JetStream cluster: tens of seconds on two cores.
		t.Skip("builds and starts the gateway binary four times")
	}
	args := []string{
		"--cluster", "3", "--targets", "jetstream,http,rpc", "--workloads", "push,pull",
		"--conc", "2", "--sizes", "256", "--queues", "1", "--duration", "200ms", "--setup-conc", "2",
	}
	b, report, logs := runBench(t, args, 5*time.Minute)
	if want := 2 * 3; len(b.cells) != want {
		t.Errorf("got %d cells, want %d (push and pull of jetstream, http, rpc)", len(b.cells), want)
	}
	for _, c := range b.cells {
		if c.msgs <= 0 || c.errors > 0 {
			t.Errorf("cell %s %s: %d msgs, %d errors (%s)", c.workload, c.target, c.msgs, c.errors, c.firstErr)
		}
	}
	for _, want := range []string{
		"- deployment: replicated cluster (--cluster 3): 3 nodes",
		"| jetstream | 2 | 256 B | 1 |", "| http | 2 | 256 B | 1 |", "| rpc | 2 | 256 B | 1 |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if len(b.clusterNodes) != 3 {
		t.Fatalf("%d cluster nodes, want 3", len(b.clusterNodes))
	}
	if pass := b.clusterNodes[0].natsPass; strings.Contains(report, pass) {
		t.Errorf("report shows the cluster's NATS password:\n%s", report)
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("report:\n%s\nlogs:\n%s", report, logs)
	}
}

func TestClusterFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--cluster", "2"},
		{"--cluster", "3", "--http", "127.0.0.1:1"},
		{"--cluster", "3", "--workloads", "push,memory"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil || !strings.Contains(err.Error(), "--cluster") {
			t.Errorf("%q: %v, want an error naming --cluster", args, err)
		}
	}
	cfg, err := parseFlags([]string{"--cluster", "3"}, io.Discard)
	if err != nil || cfg.cluster != 3 || cfg.has(wMemory) || !cfg.has(wPush) || !cfg.has(wMaxRate) {
		t.Errorf("--cluster 3 defaults: workloads %v, %v", cfg.workloads, err)
	}
}

// runBench runs the bench with args (bounded by within, a safety net) and
// returns it with its report and its log; a failed run fails t with the log.
func runBench(t *testing.T, args []string, within time.Duration) (b *bench, report, logs string) {
	t.Helper()
	cfg, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	b, err = newBench(cfg, &log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var out bytes.Buffer
	if err := b.run(ctx, &out); err != nil {
		t.Fatalf("run: %v\nlogs:\n%s", err, log.String())
	}
	return b, out.String(), log.String()
}
