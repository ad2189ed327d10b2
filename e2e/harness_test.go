package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// gatewayBinary is the lmq-gateway executable under test, set once by TestMain.
var gatewayBinary string

// Timeouts of the harness. They bound every wait; none is expected to be
// reached on a healthy machine.
const (
	startTimeout = 30 * time.Second // process start until HTTP answers
	stopTimeout  = 20 * time.Second // SIGTERM until the process has exited
	buildTimeout = 5 * time.Minute  // go build of the binary (cold cache in CI)
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The tests mostly sleep while the gateway's timers run; the default
	// -test.parallel (GOMAXPROCS, 2 on CI) would serialise those sleeps.
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "8")
	}
	code := run(m)
	chromium.stop()
	os.Exit(code)
}

func run(m *testing.M) int {
	if b := os.Getenv("LMQ_E2E_BINARY"); b != "" {
		gatewayBinary = b
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "lmq-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	gatewayBinary = filepath.Join(dir, "lmq-gateway")
	if err := build(gatewayBinary); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build lmq-gateway:", err)
		return 1
	}
	return m.Run()
}

// build compiles ./cmd/lmq-gateway of the module this package belongs to.
func build(out string) error {
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/lmq-gateway")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// Gateway is one lmq-gateway process started by a test. Its methods must be
// called from the test's goroutine (they may call t.Fatal).
type Gateway struct {
	// HTTP is the base URL of the HTTP API, "http://127.0.0.1:<port>".
	// Before the first start it holds what to listen on ("…:0": a port the
	// kernel picks); a start sets it to the address bound.
	HTTP string
	// RPCAddr is the MessagePack-RPC listen address, "127.0.0.1:<port>"
	// (like HTTP, "…:0" before the first start).
	RPCAddr string
	// NATSURL is the NATS server the gateway uses: the embedded server's
	// client port, or the URL given to StartWithNATS. Once the gateway has
	// started, an embedded server's URL carries the user and password the
	// gateway generated (embedded.ClientURLFile in DataDir).
	NATSURL string
	// DataDir is the embedded server's JetStream directory ("" with an
	// external NATS server). It survives Kill and Restart.
	DataDir string
	// Bound is what the latest start reported in its --ports-file.
	Bound boundAddrs

	t    testing.TB
	args []string
	hc   *http.Client
	out  *tailBuffer
	// portsFile is the --ports-file every start of the process is given.
	portsFile string
	// cluster is the embedded cluster g is a node of (nil: none), whose
	// nodes' route ports a restart names (pinPorts).
	cluster []*Gateway

	// base is HTTP for the Clients, which may send from other goroutines
	// while a restart moves the API to another port (start).
	base atomic.Pointer[string]

	// proc is the running process; nil between Kill/Stop and Restart.
	proc *process
}

// boundAddrs is the --ports-file of lmq-gateway (server.Addrs).
type boundAddrs struct {
	HTTP     string `json:"http"`
	RPC      string `json:"rpc"`
	Debug    string `json:"debug"`
	NATS     string `json:"nats"`
	Cluster  string `json:"cluster"`
	SQS      string `json:"sqs"`
	Complete bool   `json:"complete"`
}

// anyPort is the listen address of every port the harness asks for: the
// kernel picks a free one when the binary binds it, and the binary reports
// it (--ports-file). No port is ever chosen by the test and handed on, so
// none can be taken in between.
const anyPort = "127.0.0.1:0"

// process is one run of the binary.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's result, valid after exited
}

// Start runs lmq-gateway with an embedded nats-server on loopback ports the
// kernel picks and a fresh data directory, and waits until its HTTP API
// answers. extraArgs are appended to the command line. The process is
// stopped when t ends.
func Start(t testing.TB, extraArgs ...string) *Gateway {
	t.Helper()
	// The data directory first: cleanups run last-in first-out, so the
	// process (stopped by a cleanup newGateway registers) is gone before
	// its directory is removed.
	dataDir := t.TempDir()
	g := newGateway(t)
	g.DataDir = dataDir
	g.args = append(g.embeddedArgs("warn"), extraArgs...)
	g.start()
	return g
}

// embeddedArgs are the listen addresses and data directory of a gateway
// with an embedded NATS server, logging at level.
func (g *Gateway) embeddedArgs(level string) []string {
	return []string{
		"--http-listen", anyPort,
		"--rpc-listen", anyPort,
		"--nats-listen", anyPort,
		"--data-dir", g.DataDir,
		"--log-level", level,
	}
}

// StartWithNATS runs lmq-gateway in front of an existing NATS server
// (--nats-url natsURL) instead of its embedded one.
func StartWithNATS(t testing.TB, natsURL string, extraArgs ...string) *Gateway {
	t.Helper()
	g := newGateway(t)
	g.NATSURL = natsURL
	g.args = append([]string{
		"--http-listen", anyPort,
		"--rpc-listen", anyPort,
		"--nats-url", natsURL,
		"--log-level", "warn",
	}, extraArgs...)
	g.start()
	return g
}

func newGateway(t testing.TB) *Gateway {
	g := &Gateway{
		t:         t,
		HTTP:      "http://" + anyPort,
		RPCAddr:   anyPort,
		portsFile: filepath.Join(t.TempDir(), "ports.json"),
		out:       &tailBuffer{max: 1 << 20},
		hc: &http.Client{Transport: &http.Transport{
			Proxy:               nil, // loopback only, whatever the environment says
			MaxIdleConnsPerHost: 64,
			DisableCompression:  true,
		}},
	}
	// Stops the process. Cleanups run last-in first-out: directories the
	// process uses must come from t.TempDir calls made before this one.
	t.Cleanup(func() {
		g.shutdown()
		g.hc.CloseIdleConnections()
		if t.Failed() {
			t.Logf("lmq-gateway %s output:\n%s", strings.Join(g.args, " "), g.out.String())
		}
	})
	return g
}

// start launches the binary and waits until HTTP answers.
func (g *Gateway) start() {
	g.t.Helper()
	for try := 0; ; try++ {
		launchGateway(g, nil)
		err := awaitGateways([]*Gateway{g})
		if err == nil {
			return
		}
		// A restart listens on the ports the process had (pinPorts), and
		// the kernel may have given one of them to another test's
		// connection meanwhile (an outgoing connection's local port comes
		// from the same range). The client-facing APIs and the embedded
		// NATS server's client port then move to a port of the kernel's
		// choosing, which the Clients and NATSURL follow (a NATS client
		// of a cluster also knows the other nodes); the cluster port
		// stays pinned (the peers' routes name it).
		if flag := busyListener(g.lastStartOutput()); flag != "" && try < 3 {
			g.setArg(flag, "127.0.0.1:0")
			continue
		}
		g.t.Fatal(err)
	}
}

// busyListenerRE finds a client-facing listener whose port was taken: the
// front ends' error, or the embedded server's check (embedded/startcheck.go).
var busyListenerRE = regexp.MustCompile(`(--(?:http|rpc|debug|sqs)-listen) \S+: listen tcp \S+: bind: address already in use|(--nats-listen) \S+: address already in use`)

// busyListener is the flag of the client-facing listener whose address was
// in use, from a failed start's output; "" when that was not why.
func busyListener(out string) string {
	if m := busyListenerRE.FindStringSubmatch(out); m != nil {
		return m[1] + m[2]
	}
	return ""
}

// lastStartOutput is what the process printed since its latest start.
func (g *Gateway) lastStartOutput() string {
	out := g.out.String()
	if i := strings.LastIndex(out, "--- start "); i >= 0 {
		return out[i:]
	}
	return out
}

// setArg sets flag's value in g's arguments.
func (g *Gateway) setArg(flag, value string) {
	for i := 0; i+1 < len(g.args); i++ {
		if g.args[i] == flag {
			g.args[i+1] = value
		}
	}
}

// launchGateway starts g's process without waiting for it (a cluster node
// cannot answer until the other nodes are up too), with env (nil: the
// test's) as its environment. The ports file of an earlier start is removed
// first, so that what the harness reads is this start's.
func launchGateway(g *Gateway, env []string) {
	g.t.Helper()
	if err := os.Remove(g.portsFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		g.t.Fatal(err)
	}
	cmd := exec.Command(gatewayBinary, append(slices.Clip(g.args), "--ports-file", g.portsFile)...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = g.out, g.out
	setDeathSignal(cmd)
	fmt.Fprintf(g.out, "--- start %s\n", time.Now().Format(time.RFC3339Nano))
	if err := cmd.Start(); err != nil {
		g.t.Fatalf("start lmq-gateway: %v", err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	g.proc = p
}

// readPorts reads the ports file of the running process: ok once it has
// written it (complete or not).
func (g *Gateway) readPorts() (boundAddrs, bool) {
	var a boundAddrs
	b, err := os.ReadFile(g.portsFile)
	if err != nil {
		return a, false
	}
	// Written whole and renamed into place by the binary: a file that is
	// there parses.
	if err := json.Unmarshal(b, &a); err != nil {
		g.t.Errorf("ports file %s: %v: %q", g.portsFile, err, b)
		return a, false
	}
	return a, true
}

// awaitPorts waits until g's process has reported its ports with done
// true, and returns them; it fails the test if the process exits first.
func (g *Gateway) awaitPorts(what string, done func(boundAddrs) bool) boundAddrs {
	g.t.Helper()
	var a boundAddrs
	testwait.WithinDetail(g.t, startTimeout, "lmq-gateway reports "+what, func() (bool, string) {
		var ok bool
		if a, ok = g.readPorts(); ok && done(a) {
			return true, ""
		}
		select {
		case <-g.proc.exited:
			g.t.Fatalf("lmq-gateway exited during start-up (%v):\n%s", g.proc.err, g.out.String())
		default:
		}
		return false, fmt.Sprintf("%+v", a)
	})
	return a
}

// awaitGateways waits until all launched gateways have bound every port
// and answer HTTP. They are awaited together because cluster nodes become
// ready only together.
func awaitGateways(gws []*Gateway) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	ready := make([]bool, len(gws))
	for {
		waiting := 0
		for i, g := range gws {
			if ready[i] {
				continue
			}
			p := g.proc
			select {
			case <-p.exited:
				g.proc = nil
				return fmt.Errorf("lmq-gateway exited during start-up (%v):\n%s", p.err, g.out.String())
			default:
			}
			if a, ok := g.readPorts(); ok && a.Complete {
				g.adoptPorts(a)
				ready[i] = g.answers(ctx, "/healthz")
			}
			if !ready[i] {
				waiting++
			}
		}
		if waiting == 0 {
			break
		}
		select {
		case <-ctx.Done():
			killAll(gws)
			var out strings.Builder
			for i, g := range gws {
				if !ready[i] {
					fmt.Fprintf(&out, "\n%s:\n%s", g.HTTP, g.out.String())
				}
			}
			return fmt.Errorf("lmq-gateway did not answer HTTP within %v:%s", startTimeout, out.String())
		case <-tick.C:
		}
	}
	for _, g := range gws {
		g.adoptNATSURL()
	}
	return nil
}

// adoptPorts takes the addresses a start reported as the gateway's.
func (g *Gateway) adoptPorts(a boundAddrs) {
	g.Bound = a
	if a.HTTP != "" {
		scheme, _, _ := strings.Cut(g.HTTP, "://")
		g.HTTP = scheme + "://" + a.HTTP
		base := g.HTTP
		g.base.Store(&base)
	}
	g.RPCAddr = a.RPC
	if a.NATS != "" {
		g.NATSURL = "nats://" + a.NATS
	}
}

// pinPorts makes the next start listen on the ports the latest one bound,
// so that clients holding the URLs reach the restarted process, and a
// cluster node's peers its route port. Each port was this test's until the
// process died a moment ago; the kernel hands out fresh ports in turn, so
// it does not give a just-closed one to anyone else meanwhile.
func (g *Gateway) pinPorts() {
	a := g.Bound
	set := map[string]string{"--http-listen": a.HTTP, "--rpc-listen": a.RPC, "--debug-listen": a.Debug,
		"--nats-listen": a.NATS, "--cluster-listen": a.Cluster}
	if g.cluster != nil {
		set["--routes"] = clusterRoutes(g.cluster)
	}
	for i := 0; i+1 < len(g.args); i++ {
		if v := set[g.args[i]]; v != "" && g.args[i+1] != "" {
			g.args[i+1] = v
		}
	}
}

// killAll ends the gateways' processes that still run (kill -9).
func killAll(gws []*Gateway) {
	for _, g := range gws {
		if g.proc != nil {
			g.signalAndWait(syscall.SIGKILL, stopTimeout)
			g.proc = nil
		}
	}
}

// adoptNATSURL sets NATSURL to the URL with credentials that an embedded
// server wrote into its data directory, as a NATS tool would read it. A
// gateway without that file (--nats-url, --nats-listen-auth none, a given
// password) keeps the URL it has.
func (g *Gateway) adoptNATSURL() {
	g.t.Helper()
	if g.DataDir == "" {
		return
	}
	b, err := os.ReadFile(filepath.Join(g.DataDir, embedded.ClientURLFile))
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		g.t.Fatalf("NATS client URL: %v", err)
	}
	g.NATSURL = strings.TrimSpace(string(b))
}

// answers reports whether GET path answers 200 within a second (bounded:
// whoever holds a taken port may accept and never answer).
func (g *Gateway) answers(ctx context.Context, path string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.HTTP+path, nil)
	if err != nil {
		return false
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Kill ends the process with SIGKILL (kill -9) and waits for it to be gone.
func (g *Gateway) Kill() {
	g.t.Helper()
	if g.proc == nil {
		g.t.Fatal("Kill: lmq-gateway is not running")
	}
	fmt.Fprintf(g.out, "--- SIGKILL %s\n", time.Now().Format(time.RFC3339Nano))
	g.signalAndWait(syscall.SIGKILL, stopTimeout)
	g.proc = nil
	// Connections to the dead process are useless now.
	g.hc.CloseIdleConnections()
}

// Stop ends the process with SIGTERM, waits for it to exit, and fails the
// test if it does not exit cleanly in time.
func (g *Gateway) Stop() {
	g.t.Helper()
	if g.proc == nil {
		g.t.Fatal("Stop: lmq-gateway is not running")
	}
	p := g.proc
	fmt.Fprintf(g.out, "--- SIGTERM %s\n", time.Now().Format(time.RFC3339Nano))
	if !g.signalAndWait(syscall.SIGTERM, stopTimeout) {
		g.t.Errorf("lmq-gateway did not exit within %v of SIGTERM; killed", stopTimeout)
	} else if p.err != nil {
		g.t.Errorf("lmq-gateway exited with %v after SIGTERM", p.err)
	}
	g.proc = nil
	g.hc.CloseIdleConnections()
}

// Restart starts the binary again with the same arguments and data
// directory, on the ports it had (pinPorts). A still running process is
// stopped first (SIGTERM).
func (g *Gateway) Restart() {
	g.t.Helper()
	if g.proc != nil {
		g.Stop()
	}
	g.pinPorts()
	g.start()
}

// RestartAfter is Restart of a stopped or killed gateway once down has
// passed: the time down is the test's input (a window falls due, clients
// find nobody), and nothing runs to be observed meanwhile.
func (g *Gateway) RestartAfter(down time.Duration) {
	g.t.Helper()
	time.Sleep(down)
	g.Restart()
}

// Output is what the gateway wrote to stdout and stderr so far (the last MiB).
func (g *Gateway) Output() string { return g.out.String() }

// PID is the process id of the running gateway, 0 between Kill/Stop and
// Restart (for reading /proc/<pid>, e.g. with rssBytes).
func (g *Gateway) PID() int {
	if g.proc == nil {
		return 0
	}
	return g.proc.cmd.Process.Pid
}

// signalAndWait sends sig and waits up to d for the process to exit; on
// timeout it kills it and reports false.
func (g *Gateway) signalAndWait(sig syscall.Signal, d time.Duration) bool {
	p := g.proc
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		return true
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-p.exited // SIGKILL cannot be ignored
		return false
	}
}

// shutdown ends a still running process at the end of the test. SIGTERM
// first, so the embedded server leaves its files tidy; the process exits
// on its own well within the timeout.
func (g *Gateway) shutdown() {
	if g.proc == nil {
		return
	}
	g.signalAndWait(syscall.SIGTERM, stopTimeout)
	g.proc = nil
}

// StartClient starts a gateway (Start) and opens an HTTP client on it: the
// opening of most tests.
func StartClient(t testing.TB, extraArgs ...string) (*Gateway, *Client) {
	t.Helper()
	gw := Start(t, extraArgs...)
	return gw, gw.Client(t)
}

// Client returns HTTP helpers bound to t (a subtest may use its parent's
// gateway).
func (g *Gateway) Client(t testing.TB) *Client {
	return &Client{t: t, base: g.HTTP, gw: g, hc: g.hc}
}

// StartNATS runs a stock nats-server with JetStream inside the test process,
// on a free loopback port with default limits (max_payload 1 MiB), and
// returns its client URL. It is shut down when t ends.
func StartNATS(t testing.TB) string {
	t.Helper()
	s, _ := startNATSServer(t)
	return s.ClientURL()
}

// startNATSServer is StartNATS returning the server and its options (for
// RestartNATS). Shutting it down before t ends is allowed.
func startNATSServer(t testing.TB) (*server.Server, *server.Options) {
	t.Helper()
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(startTimeout) {
		s.Shutdown()
		t.Fatalf("nats-server not ready within %v", startTimeout)
	}
	t.Cleanup(func() {
		s.Shutdown() // a no-op if the test stopped it
		s.WaitForShutdown()
	})
	return s, opts
}

// awaitMetric polls the gateway's /metrics until the sample named name
// satisfies ok, and fails the test if it does not within startTimeout. It
// replaces sleeps that waited for something to happen in the gateway: a
// long-poll to be waiting (lmq_long_polls_waiting), deliveries to time out
// (lmq_deliveries_in_flight). The gauges count the whole gateway, so a test
// that shares its gateway with others can wait for a lower bound only.
func awaitMetric(t testing.TB, c *Client, name, what string, ok func(float64) bool) {
	t.Helper()
	testwait.WithinDetail(t, startTimeout, what, func() (bool, string) {
		r := c.Do(http.MethodGet, "/metrics", nil)
		last := "no sample"
		for line := range strings.Lines(string(r.Body)) {
			v, found := strings.CutPrefix(strings.TrimSpace(line), name+" ")
			if !found {
				continue
			}
			last = v
			if f, err := strconv.ParseFloat(v, 64); err == nil && ok(f) {
				return true, ""
			}
		}
		return false, name + " is " + last
	})
}

// awaitWaitingPulls waits until at least n pulls wait in the gateway.
func awaitWaitingPulls(t testing.TB, c *Client, n int) {
	t.Helper()
	awaitMetric(t, c, "lmq_long_polls_waiting", "pulls waiting", func(v float64) bool { return v >= float64(n) })
}

// awaitPullsOn waits until exactly n pulls wait on queue q in the gateway
// (GET /ui/api/clients, the console's list): unlike lmq_long_polls_waiting
// it counts one queue's, so that tests sharing a gateway may wait for none.
func awaitPullsOn(t testing.TB, c *Client, q string, n int) {
	t.Helper()
	testwait.WithinDetail(t, startTimeout, fmt.Sprintf("%d pulls waiting on %s", n, q), func() (bool, string) {
		r := c.Do(http.MethodGet, "/ui/api/clients", nil)
		var list struct {
			Pulls []struct {
				Waits string `json:"waits"`
			} `json:"pulls"`
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &list) != nil {
			return false, r.String()
		}
		on := 0
		for _, p := range list.Pulls {
			if p.Waits == q {
				on++
			}
		}
		return on == n, fmt.Sprintf("%d waiting on %s", on, q)
	})
}

// awaitNoneInFlight waits until the gateway holds no unanswered delivery
// (the test's deliveries have timed out).
func awaitNoneInFlight(t testing.TB, c *Client) {
	t.Helper()
	awaitMetric(t, c, "lmq_deliveries_in_flight", "deliveries in flight", func(v float64) bool { return v == 0 })
}

// heavy skips t under go test -short, the inner loop (76 s for
// the whole repository on 2 cores); plain go test ./... runs it. For clusters, kill
// loops, bodies of many MiB and loads: what only a full run must cover.
func heavy(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip(what + ": heavy; runs in go test ./...")
	}
}

// tailBuffer is a concurrency-safe writer keeping the last max bytes, so a
// chatty gateway cannot exhaust the test's memory.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
	cut bool
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if over := len(w.b) - w.max; over > 0 {
		w.b = append(w.b[:0], w.b[over:]...)
		w.cut = true
	}
	return len(p), nil
}

func (w *tailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cut {
		return "[…]" + string(w.b)
	}
	return string(w.b)
}

// TestHarnessPortsFile: a gateway started on port 0 everywhere reports the
// ports it bound, it is the process listening on each, and a restart keeps
// them (clients hold the URLs).
func TestHarnessPortsFile(t *testing.T) {
	t.Parallel()
	g := Start(t, "--debug-listen", anyPort)
	a := g.Bound
	if !a.Complete {
		t.Fatalf("ports file not complete: %+v", a)
	}
	for what, addr := range map[string]string{"http": a.HTTP, "rpc": a.RPC, "debug": a.Debug, "nats": a.NATS} {
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "0" {
			t.Fatalf("%s address %q (%v)", what, addr, err)
		}
		if !listensOn(g.PID(), addr) {
			t.Errorf("lmq-gateway (pid %d) does not listen on its %s address %s", g.PID(), what, addr)
		}
	}
	if g.HTTP != "http://"+a.HTTP || g.RPCAddr != a.RPC || !strings.HasSuffix(g.NATSURL, "@"+a.NATS) {
		t.Errorf("HTTP %s, RPC %s, NATS %s: not the reported %+v", g.HTTP, g.RPCAddr, g.NATSURL, a)
	}
	c := g.Client(t)
	c.Push("harness/port", []byte("x"), "text/plain")
	g.Kill()
	g.Restart()
	if g.Bound != a {
		t.Errorf("after a restart the gateway bound %+v, before %+v", g.Bound, a)
	}
	r := c.MustPull("harness/port", "5", "x")
	c.ExpectReply(http.StatusNoContent, "harness/port", r.ID(), "ack")
}

// A restart whose client-facing port was taken meanwhile (by another
// test's connection, say) comes up on another port, which the test's
// Client follows.
func TestHarnessRestartOnTakenPort(t *testing.T) {
	t.Parallel()
	if got := busyListener("lmq-gateway: --rpc-listen 127.0.0.1:45977: listen tcp 127.0.0.1:45977: bind: address already in use"); got != "--rpc-listen" {
		t.Fatalf("busyListener = %q", got)
	}
	if got := busyListener("lmq-gateway: embedded: --nats-listen 127.0.0.1:32857: address already in use (another nats-server or gateway may be running; ...)"); got != "--nats-listen" {
		t.Fatalf("busyListener = %q, want --nats-listen", got)
	}
	if got := busyListener("lmq-gateway: embedded: --cluster-listen 127.0.0.1:41605: address already in use (...)"); got != "" {
		t.Fatalf("busyListener = %q: the cluster port stays pinned", got)
	}
	gw, c := StartClient(t)
	c.Push("taken", []byte("x"), "text/plain")
	old := gw.Bound.HTTP
	gw.Kill()
	ln, err := net.Listen("tcp", old)
	if err != nil {
		t.Skipf("the old port was taken by someone else already: %v", err)
	}
	defer ln.Close()
	gw.Restart()
	if gw.Bound.HTTP == old {
		t.Fatalf("restarted on the taken port %s", old)
	}
	c.MustPull("taken", "5", "x")

	// The same for the embedded server's NATS client port.
	c.Push("taken-nats", []byte("y"), "text/plain")
	oldNATS := gw.Bound.NATS
	gw.Kill()
	ln2, err := net.Listen("tcp", oldNATS)
	if err != nil {
		t.Skipf("the old NATS port was taken by someone else already: %v", err)
	}
	defer ln2.Close()
	gw.Restart()
	if gw.Bound.NATS == oldNATS || !strings.Contains(gw.NATSURL, gw.Bound.NATS) {
		t.Fatalf("restarted on NATS %s (taken: %s), NATSURL %s", gw.Bound.NATS, oldNATS, gw.NATSURL)
	}
	c.MustPull("taken-nats", "5", "y")
}
