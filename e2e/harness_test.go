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
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/lmq-gateway/lmq-gateway/embedded"
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
	nats := freeAddr(t)
	g.NATSURL = "nats://" + nats
	g.args = append([]string{
		"--http-listen", strings.TrimPrefix(g.HTTP, "http://"),
		"--rpc-listen", g.RPCAddr,
		"--nats-listen", nats,
		"--data-dir", g.DataDir,
		"--log-level", "warn",
	}, extraArgs...)
	g.start()
	return g
}

// StartWithNATS runs lmq-gateway in front of an existing NATS server
// (--nats-url natsURL) instead of its embedded one.
func StartWithNATS(t testing.TB, natsURL string, extraArgs ...string) *Gateway {
	t.Helper()
	g := newGateway(t)
	g.NATSURL = natsURL
	g.args = append([]string{
		"--http-listen", strings.TrimPrefix(g.HTTP, "http://"),
		"--rpc-listen", g.RPCAddr,
		"--nats-url", natsURL,
		"--log-level", "warn",
	}, extraArgs...)
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

// start launches the binary and waits until HTTP answers.
func (g *Gateway) start() {
	g.t.Helper()
	launchGateway(g)
	awaitGateway(g)
}

// launchGateway starts g's process without waiting for it (a cluster node
// cannot answer until the other nodes are up too).
func launchGateway(g *Gateway) {
	g.t.Helper()
	cmd := exec.Command(gatewayBinary, g.args...)
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

// awaitGateway waits until a launched gateway answers HTTP.
func awaitGateway(g *Gateway) {
	g.t.Helper()
	p := g.proc
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !g.ready(ctx) {
		select {
		case <-p.exited:
			g.proc = nil
			g.t.Fatalf("lmq-gateway exited during start-up (%v):\n%s", p.err, g.out.String())
		case <-ctx.Done():
			g.t.Fatalf("lmq-gateway did not answer HTTP within %v:\n%s", startTimeout, g.out.String())
		case <-tick.C:
		}
	}
	g.adoptNATSURL()
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
func (g *Gateway) ready(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.HTTP+"/properties", nil)
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
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s.ClientURL()
}

// freeAddr returns a loopback address with a port that was free a moment
// ago. (The kernel does not hand out the same ephemeral port again at once,
// so the race with other programs is negligible in tests.)
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
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
