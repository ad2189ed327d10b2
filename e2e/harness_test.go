package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/internal/testwait"
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
	os.Exit(run(m))
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
	HTTP string
	// RPCAddr is the MessagePack-RPC listen address, "127.0.0.1:<port>".
	RPCAddr string
	// NATSURL is the NATS server the gateway uses: the embedded server's
	// client port, or the URL given to StartWithNATS. Once the gateway has
	// started, an embedded server's URL carries the user and password the
	// gateway generated (embedded.ClientURLFile in DataDir).
	NATSURL string
	// DataDir is the embedded server's JetStream directory ("" with an
	// external NATS server). It survives Kill and Restart.
	DataDir string

	t    testing.TB
	args []string
	hc   *http.Client
	out  *tailBuffer

	// proc is the running process; nil between Kill/Stop and Restart.
	proc *process
	// redraw, if set, draws fresh ports and rebuilds args from them; the
	// first start retries with it when a port was taken (see startAttempts).
	redraw func()
	// started is set once the process has answered; from then on the
	// ports stay (clients hold the URLs), so Restart retries on the same.
	started bool
}

// process is one run of the binary.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once Wait returned
	err    error         // Wait's result, valid after exited
}

// Start runs lmq-gateway with an embedded nats-server on free loopback ports
// and a fresh data directory, and waits until its HTTP API answers. extraArgs
// are appended to the command line. The process is stopped when t ends.
func Start(t testing.TB, extraArgs ...string) *Gateway {
	t.Helper()
	// The data directory first: cleanups run last-in first-out, so the
	// process (stopped by a cleanup newGateway registers) is gone before
	// its directory is removed.
	dataDir := t.TempDir()
	g := newGateway(t)
	g.DataDir = dataDir
	g.redraw = func() {
		g.HTTP, g.RPCAddr = "http://"+freeAddr(t), freeAddr(t)
		nats := freeAddr(t)
		g.NATSURL = "nats://" + nats
		g.args = append([]string{
			"--http-listen", strings.TrimPrefix(g.HTTP, "http://"),
			"--rpc-listen", g.RPCAddr,
			"--nats-listen", nats,
			"--data-dir", g.DataDir,
			"--log-level", "warn",
		}, extraArgs...)
	}
	g.redraw()
	g.start()
	return g
}

// StartWithNATS runs lmq-gateway in front of an existing NATS server
// (--nats-url natsURL) instead of its embedded one.
func StartWithNATS(t testing.TB, natsURL string, extraArgs ...string) *Gateway {
	t.Helper()
	g := newGateway(t)
	g.NATSURL = natsURL
	g.redraw = func() {
		g.HTTP, g.RPCAddr = "http://"+freeAddr(t), freeAddr(t)
		g.args = append([]string{
			"--http-listen", strings.TrimPrefix(g.HTTP, "http://"),
			"--rpc-listen", g.RPCAddr,
			"--nats-url", natsURL,
			"--log-level", "warn",
		}, extraArgs...)
	}
	g.redraw()
	g.start()
	return g
}

func newGateway(t testing.TB) *Gateway {
	g := &Gateway{
		t:       t,
		HTTP:    "http://" + freeAddr(t),
		RPCAddr: freeAddr(t),
		out:     &tailBuffer{max: 1 << 20},
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

// startAttempts bounds the starts of one gateway (or cluster) that fail
// because a port was taken. freeAddr's port is free when drawn but not held:
// until the binary binds it, any other program (another test's outgoing
// connection, which draws from the same ephemeral range, or another helper
// process) can take it. The binary reports that as "address already in use";
// the harness then draws new ports and starts again. A test that needs the
// same ports again (Restart) retries on them after a pause.
const startAttempts = 5

// errPortTaken marks a start that failed only because a listen address was
// in use.
var errPortTaken = errors.New("a listen address was already in use")

// start launches the binary and waits until HTTP answers, retrying on ports
// taken meanwhile.
func (g *Gateway) start() {
	g.t.Helper()
	for attempt := 1; ; attempt++ {
		launchGateway(g)
		err := awaitGateways([]*Gateway{g})
		if err == nil {
			return
		}
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			g.t.Fatal(err)
		}
		g.t.Logf("start %d of %d: %v; retrying", attempt, startAttempts, err)
		if g.redraw != nil && !g.started {
			g.redraw()
		} else {
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond) // let the other holder finish
		}
	}
}

// launchGateway starts g's process without waiting for it (a cluster node
// cannot answer until the other nodes are up too).
func launchGateway(g *Gateway) {
	g.t.Helper()
	cmd := exec.Command(gatewayBinary, g.args...)
	cmd.Stdout, cmd.Stderr = g.out, g.out
	setDeathSignal(cmd)
	fmt.Fprintf(g.out, "%s%s\n", startMarker, time.Now().Format(time.RFC3339Nano))
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

// startMarker begins the line launchGateway writes into the output before
// each start.
const startMarker = "--- start "

// awaitGateways waits until all launched gateways answer HTTP. If one of
// them cannot bind a port, every one still running is killed and the error
// wraps errPortTaken; any other failure to start (exit, timeout) is returned
// as it is. The gateways are awaited together because cluster nodes become
// ready only together, and a node that failed to bind would leave the
// others waiting for it until the timeout.
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
				if g.portTaken() {
					killAll(gws)
					return fmt.Errorf("lmq-gateway %s exited during start-up (%v): %w", g.HTTP, p.err, errPortTaken)
				}
				return fmt.Errorf("lmq-gateway exited during start-up (%v):\n%s", p.err, g.out.String())
			default:
			}
			if g.portTaken() {
				// The embedded server logs its failed listen and
				// waits for readiness until its own timeout.
				killAll(gws)
				return fmt.Errorf("lmq-gateway %s: %w", g.HTTP, errPortTaken)
			}
			// An answer counts only from this process: another test's
			// gateway may have drawn the same port and answer on it
			// while this one has not bound it yet (it then fails to,
			// and the start is retried on new ports).
			if ready[i] = g.ready(ctx) && listensOn(p.cmd.Process.Pid, strings.TrimPrefix(g.HTTP, "http://")); !ready[i] {
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
		g.started = true
		g.adoptNATSURL()
	}
	return nil
}

// portTaken reports whether the output of the latest start says that a
// listen address was in use (net.Listen's error, which the gateway's own
// listeners and its embedded nats-server's log both carry).
func (g *Gateway) portTaken() bool {
	out := g.out.String()
	if i := strings.LastIndex(out, startMarker); i >= 0 {
		out = out[i:]
	}
	return strings.Contains(out, "address already in use")
}

// killAll ends the gateways' processes that still run (kill -9): a start
// that failed is repeated from scratch.
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

// ready reports whether the HTTP API answers a harmless request.
func (g *Gateway) ready(ctx context.Context) bool { return g.answers(ctx, "/properties") }

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

// Restart starts the binary again with the same arguments, so the same data
// directory and ports. A still running process is stopped first (SIGTERM).
func (g *Gateway) Restart() {
	g.t.Helper()
	if g.proc != nil {
		g.Stop()
	}
	g.start()
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

// Client returns HTTP helpers bound to t (a subtest may use its parent's
// gateway).
func (g *Gateway) Client(t testing.TB) *Client {
	return &Client{t: t, base: g.HTTP, hc: g.hc}
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

// drawnAddrs are the loopback addresses this test process has handed out
// (freeAddr, holdAddrs): none is handed out twice. A gateway keeps its
// ports across Kill and Restart, and while it is down (a cluster node for
// seconds: it binds HTTP only once JetStream is ready) the kernel sees them
// free and could give one to another test. (A run draws a few thousand of
// the about 28,000 ephemeral ports.) Servers that pick their own random
// port (nats-server's -1) are not covered.
var drawnAddrs = struct {
	sync.Mutex
	m map[string]bool
}{m: make(map[string]bool)}

// claimAddr marks addr as handed out; false if it was already.
func claimAddr(addr string) bool {
	drawnAddrs.Lock()
	defer drawnAddrs.Unlock()
	if drawnAddrs.m[addr] {
		return false
	}
	drawnAddrs.m[addr] = true
	return true
}

// maxDraws bounds the attempts at drawing a port not handed out before.
const maxDraws = 100

// freeAddr returns a loopback address with a port that was free a moment
// ago and that no other test of this process was given.
func freeAddr(t testing.TB) string {
	t.Helper()
	for range maxDraws {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		addr := l.Addr().String()
		l.Close()
		if claimAddr(addr) {
			return addr
		}
	}
	t.Fatalf("no fresh loopback port in %d draws", maxDraws)
	return ""
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

// awaitNoneInFlight waits until the gateway holds no unanswered delivery
// (the test's deliveries have timed out).
func awaitNoneInFlight(t testing.TB, c *Client) {
	t.Helper()
	awaitMetric(t, c, "lmq_deliveries_in_flight", "deliveries in flight", func(v float64) bool { return v == 0 })
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

// TestHarnessPortTaken: a gateway whose port was taken between the harness
// drawing it and the binary binding it is started again on new ports, for
// the HTTP port and for the embedded server's NATS port.
func TestHarnessPortTaken(t *testing.T) {
	t.Parallel()
	for _, which := range []string{"--http-listen", "--nats-listen"} {
		t.Run(which, func(t *testing.T) {
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			g := newGateway(t)
			g.DataDir = t.TempDir()
			draws := 0
			g.redraw = func() {
				draws++
				g.HTTP, g.RPCAddr = "http://"+freeAddr(t), freeAddr(t)
				nats := freeAddr(t)
				if draws == 1 {
					// The first draw hands out a port someone holds.
					switch which {
					case "--http-listen":
						g.HTTP = "http://" + taken.Addr().String()
					case "--nats-listen":
						nats = taken.Addr().String()
					}
				}
				g.NATSURL = "nats://" + nats
				g.args = []string{
					"--http-listen", strings.TrimPrefix(g.HTTP, "http://"),
					"--rpc-listen", g.RPCAddr,
					"--nats-listen", nats,
					"--data-dir", g.DataDir,
					"--log-level", "warn",
				}
			}
			g.redraw()
			g.start()
			if draws != 2 {
				t.Errorf("ports drawn %d times, want 2 (one retry)", draws)
			}
			c := g.Client(t)
			c.Push("harness/port", []byte("x"), "text/plain")
			r := c.MustPull("harness/port", "5", "x")
			c.ExpectReply(http.StatusNoContent, "harness/port", r.ID(), "ack")
		})
	}
	t.Run("opsLaunch", func(t *testing.T) {
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		g := newOpsGateway(t)
		g.HTTP = "http://" + taken.Addr().String()
		g.opsLaunch(nil, "--http-listen", strings.TrimPrefix(g.HTTP, "http://"))
		if g.HTTP == "http://"+taken.Addr().String() {
			t.Fatalf("started on the taken port %s", g.HTTP)
		}
		c := g.Client(t)
		c.Push("harness/port", []byte("x"), "text/plain")
		c.MustPull("harness/port", "5", "x")
	})
}
