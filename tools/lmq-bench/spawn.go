package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// gatewayProc is a gateway started by the bench, on free loopback ports with
// a temporary data dir. Its NATS client port is open too, for the jetstream
// target.
type gatewayProc struct {
	procs    int // GOMAXPROCS (--server-procs); 0: Go's default
	dir      string
	dataDir  string
	logPath  string
	bin      string
	args     []string
	starts   int
	httpAddr string
	rpcAddr  string
	natsAddr string
	// sqsAddr serves the Amazon SQS API; "" when the sqs target is not
	// selected or the binary has no --sqs-listen.
	sqsAddr string
	// debugAddr serves the gateway's pprof (--profile); "" when off.
	debugAddr string
	// natsURL carries the user and password of natsPass, which the gateway
	// is given in its environment: kept across restarts, which empty the
	// data directory where it would otherwise generate a new one.
	natsURL  string
	natsPass string
	// natsEnv is the variable that hands the gateway its NATS password
	// (LMQ_NATS_LISTEN_PASSWORD of its embedded server, or LMQ_NATS_PASSWORD
	// of --nats-url); "": the former, from natsPass.
	natsEnv string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error // valid once exited is closed
	keep    bool
	log     *slog.Logger
}

// moduleRoot finds the lmq-gateway module the bench runs in, to build the
// gateway from it.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module: run from the lmq-gateway checkout or pass --gateway-bin")
	}
	return filepath.Dir(gomod), nil
}

func freeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// extNATS is a NATS deployment a spawned gateway connects to (--nats-url)
// instead of running its own.
type extNATS struct {
	hosts string // nats:// URLs without credentials, comma-separated
	user  string
	pass  string
	url   string // hosts with the credentials, for the bench's own clients
}

// buildGateway builds ./cmd/lmq-gateway of the module the bench runs in
// into dir and returns the binary's path.
func buildGateway(ctx context.Context, dir string, log *slog.Logger) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "lmq-gateway")
	log.Info("building gateway", "module", root, "out", bin)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/lmq-gateway")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/lmq-gateway: %w\n%s", err, out)
	}
	return bin, nil
}

// spawnGateway starts a gateway with its embedded NATS server; or, with
// ext, a gateway that is a client of the NATS servers ext names.
func spawnGateway(ctx context.Context, cfg config, ext *extNATS, log *slog.Logger) (*gatewayProc, error) {
	dir, err := os.MkdirTemp("", "lmq-bench-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	g := &gatewayProc{dir: dir, keep: cfg.keep, log: log, procs: cfg.serverProcs}
	fail := func(err error) (*gatewayProc, error) {
		g.stop()
		return nil, err
	}

	g.bin = cfg.gatewayBin
	if g.bin == "" {
		if g.bin, err = buildGateway(ctx, dir, log); err != nil {
			return fail(err)
		}
	}

	var ports [3]int
	for i := range ports {
		if ports[i], err = freeLoopbackPort(); err != nil {
			return fail(err)
		}
	}
	g.httpAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	g.rpcAddr = fmt.Sprintf("127.0.0.1:%d", ports[1])
	g.dataDir = filepath.Join(dir, "data")
	g.args = []string{
		"--http-listen", g.httpAddr,
		"--rpc-listen", g.rpcAddr,
		"--data-dir", g.dataDir,
	}
	if ext != nil {
		// The password goes by the environment (launch), off the command line.
		g.natsURL, g.natsEnv = ext.url, "LMQ_NATS_PASSWORD="+ext.pass
		g.args = append(g.args, "--nats-url", ext.hosts, "--nats-user", ext.user)
	} else {
		g.natsAddr = fmt.Sprintf("127.0.0.1:%d", ports[2])
		pw := make([]byte, 16)
		if _, err := rand.Read(pw); err != nil {
			return fail(fmt.Errorf("nats password: %w", err))
		}
		g.natsPass = hex.EncodeToString(pw)
		g.natsURL = (&url.URL{Scheme: "nats", User: url.UserPassword("lmq", g.natsPass), Host: g.natsAddr}).String()
		g.natsEnv = "LMQ_NATS_LISTEN_PASSWORD=" + g.natsPass
		g.args = append(g.args, "--nats-listen", g.natsAddr)
	}
	// Access logging costs the gateway per request; turn it off where the
	// binary has the flag (older builds do not, and reject unknown flags).
	help, _ := exec.CommandContext(ctx, g.bin, "--help").CombinedOutput()
	if bytes.Contains(help, []byte("-access-log")) {
		g.args = append(g.args, "--access-log=false")
	}
	// The SQS API on a port the gateway picks, learned from its ports file
	// (a port picked here could be taken by the time the gateway binds it;
	// the other ports keep the older way, which builds without a ports
	// file need).
	portsFile := ""
	if slices.Contains(cfg.targets, tSQS) && bytes.Contains(help, []byte("-sqs-listen")) {
		portsFile = filepath.Join(dir, "ports.json")
		g.args = append(g.args, "--sqs-listen", "127.0.0.1:0", "--ports-file", portsFile)
	}
	if cfg.profileDir != "" {
		if !bytes.Contains(help, []byte("-debug-listen")) {
			return fail(errors.New("--profile: the gateway binary has no --debug-listen flag"))
		}
		port, err := freeLoopbackPort()
		if err != nil {
			return fail(err)
		}
		g.debugAddr = fmt.Sprintf("127.0.0.1:%d", port)
		g.args = append(g.args, "--debug-listen", g.debugAddr)
	}
	g.args = append(g.args, cfg.gatewayArgs...)
	if err := g.start(ctx); err != nil {
		return fail(err)
	}
	// RPC may be missing from a gateway build (it landed after HTTP); the
	// rpc target is then skipped rather than the whole run failing.
	if !dialsWithin(ctx, g.rpcAddr, 2*time.Second) {
		log.Warn("spawned gateway does not serve MessagePack-RPC", "addr", g.rpcAddr)
		g.rpcAddr = ""
	}
	if portsFile != "" {
		if g.sqsAddr, err = sqsPort(ctx, portsFile, g.exited); err != nil {
			return fail(err)
		}
		// Restarts (memory) keep the port, as they keep the others: the
		// target holds the address.
		for i, a := range g.args {
			if a == "--sqs-listen" {
				g.args[i+1] = g.sqsAddr
				break
			}
		}
	}
	log.Info("gateway ready", "pid", g.cmd.Process.Pid, "http", g.httpAddr, "rpc", g.rpcAddr, "sqs", g.sqsAddr, "nats", redactURL(g.natsURL))
	return g, nil
}

// start runs the gateway with g.args and waits until it is ready.
func (g *gatewayProc) start(ctx context.Context) error {
	if err := g.launch(); err != nil {
		return err
	}
	if err := g.waitReady(ctx, 60*time.Second); err != nil {
		return fmt.Errorf("%w\n--- gateway log (tail) ---\n%s", err, tail(g.logPath, 40))
	}
	return nil
}

// launch runs the gateway with g.args without waiting for it to be ready
// (the queues workload times its readiness itself).
func (g *gatewayProc) launch() error {
	g.starts++
	g.logPath = filepath.Join(g.dir, fmt.Sprintf("gateway-%d.log", g.starts))
	logf, err := os.Create(g.logPath)
	if err != nil {
		return fmt.Errorf("gateway log: %w", err)
	}
	// Not CommandContext: the gateway must outlive a cancelled run long
	// enough to be stopped politely by halt().
	cmd := exec.Command(g.bin, g.args...)
	// Not a flag: the password stays out of ps and the log of the args.
	// Builds from before client port authentication ignore it, and accept
	// the URL's credentials on their open port.
	env := g.natsEnv
	if env == "" {
		env = "LMQ_NATS_LISTEN_PASSWORD=" + g.natsPass
	}
	cmd.Env = append(serverEnv(g.procs), env)
	cmd.Stdout = logf
	cmd.Stderr = logf
	g.log.Info("starting gateway", "bin", g.bin, "args", strings.Join(g.args, " "))
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start gateway: %w", err)
	}
	exited := make(chan struct{})
	g.cmd, g.exited = cmd, exited
	go func() {
		err := cmd.Wait()
		logf.Close()
		g.waitErr = err
		close(exited)
	}()
	return nil
}

// restart stops the gateway and starts it again on the same ports with an
// empty data dir: a fresh process, for a measurement (memory) that the
// earlier workloads would distort.
func (g *gatewayProc) restart(ctx context.Context) error {
	g.halt()
	if err := os.RemoveAll(g.dataDir); err != nil {
		return fmt.Errorf("clearing gateway data: %w", err)
	}
	return g.start(ctx)
}

// waitReady waits until the HTTP and NATS ports accept connections and the
// HTTP API answers a request, or the process exits.
func (g *gatewayProc) waitReady(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer hc.CloseIdleConnections()
	for {
		if g.readyOnce(ctx, hc) {
			return nil
		}
		select {
		case <-g.exited:
			return fmt.Errorf("gateway exited before it was ready: %v", g.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("gateway not ready: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (g *gatewayProc) readyOnce(ctx context.Context, hc *http.Client) bool {
	var d net.Dialer
	for _, a := range []string{g.httpAddr, g.natsAddr} {
		if a == "" {
			continue // a client of external NATS (--nats-url) listens for none
		}
		c, err := d.DialContext(ctx, "tcp", a)
		if err != nil {
			return false
		}
		c.Close()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.httpAddr+"/stats", nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode < 500
}

// dialsWithin reports whether addr accepts a TCP connection within limit.
func dialsWithin(ctx context.Context, addr string, limit time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var d net.Dialer
	for ctx.Err() == nil {
		if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
			c.Close()
			return true
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return false
}

func (g *gatewayProc) pid() int {
	if g == nil || g.cmd == nil || g.cmd.Process == nil {
		return 0
	}
	return g.cmd.Process.Pid
}

// stop ends the gateway (SIGTERM, then SIGKILL after 10 s) and removes the
// temp dir unless --keep.
func (g *gatewayProc) stop() {
	if g == nil {
		return
	}
	g.halt()
	if g.keep {
		g.log.Info("kept gateway dir", "dir", g.dir, "log", g.logPath)
		return
	}
	if err := os.RemoveAll(g.dir); err != nil {
		g.log.Warn("removing temp dir", "dir", g.dir, "err", err)
	}
}

// halt ends the gateway process: SIGTERM, then SIGKILL after 10 s.
func (g *gatewayProc) halt() {
	if g.cmd != nil && g.cmd.Process != nil {
		select {
		case <-g.exited:
		default:
			_ = g.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-g.exited:
			case <-time.After(10 * time.Second):
				g.log.Warn("gateway did not stop on SIGTERM; killing it", "pid", g.cmd.Process.Pid)
				_ = g.cmd.Process.Kill()
				<-g.exited
			}
		}
	}
}

// alive reports a gateway that exited during the run.
func (g *gatewayProc) alive() error {
	if g == nil {
		return nil
	}
	select {
	case <-g.exited:
		return fmt.Errorf("gateway exited: %v\n--- gateway log (tail) ---\n%s", g.waitErr, tail(g.logPath, 40))
	default:
		return nil
	}
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// procRSS reads VmRSS and VmHWM (bytes) from /proc/PID/status.
// serverEnv is the environment of a process the bench spawns: its own,
// with GOMAXPROCS set when procs is positive (--server-procs).
func serverEnv(procs int) []string {
	env := os.Environ()
	if procs > 0 {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(procs))
	}
	return env
}

func procRSS(pid int) (rss, hwm int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("rss of %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		for _, k := range []struct {
			prefix string
			dst    *int64
		}{{"VmRSS:", &rss}, {"VmHWM:", &hwm}} {
			if rest, ok := strings.CutPrefix(line, k.prefix); ok {
				f := strings.Fields(rest)
				if len(f) >= 1 {
					kb, _ := strconv.ParseInt(f[0], 10, 64)
					*k.dst = kb << 10
				}
			}
		}
	}
	return rss, hwm, sc.Err()
}

// clockTicks is USER_HZ, 100 on every Linux the bench targets (Go has no
// sysconf without cgo).
const clockTicks = 100

// procCPU is user+system CPU time of a process so far, from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu of %d: %w", pid, err)
	}
	// The command name may contain spaces: fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("cpu of %d: malformed stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// After ')': state(3) ppid(4) ... utime is field 14, stime 15 (1-based).
	if len(f) < 13 {
		return 0, fmt.Errorf("cpu of %d: short stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("cpu of %d: bad stat fields", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// redactURL hides the password of a URL for logs and reports.
func redactURL(s string) string {
	// A cluster's URLs come as a comma-separated list.
	if strings.Contains(s, ",") {
		parts := strings.Split(s, ",")
		for i, p := range parts {
			parts[i] = redactURL(p)
		}
		return strings.Join(parts, ",")
	}
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	return u.Redacted()
}

// sqsPort reads the address of the SQS API ("sqs") from the gateway's ports
// file, waiting until the gateway wrote it complete (every listener bound),
// or exited.
func sqsPort(ctx context.Context, path string, exited <-chan struct{}) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if b, err := os.ReadFile(path); err == nil {
			var ports struct {
				SQS      string `json:"sqs"`
				Complete bool   `json:"complete"`
			}
			if err := json.Unmarshal(b, &ports); err != nil {
				return "", fmt.Errorf("gateway's ports file %s: %w", path, err)
			}
			if ports.Complete {
				if ports.SQS == "" {
					return "", fmt.Errorf("gateway's ports file %s has no \"sqs\" address though --sqs-listen was given", path)
				}
				return ports.SQS, nil
			}
		}
		select {
		case <-exited:
			return "", errors.New("gateway exited before writing its ports file")
		case <-ctx.Done():
			return "", fmt.Errorf("gateway's ports file %s: not complete: %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
