package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/lmqexporter"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testpki"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// Tests of issue 6 (operations): /stats, /metrics, health, the status and
// version commands, configuration precedence, authentication, and graceful
// shutdown, against the real binary.

func TestOpsEndpoints(t *testing.T) {
	t.Parallel()
	// A temp dir first: its removal, registered now, then runs after the
	// harness has stopped the gateway (Start takes its data dir later).
	_ = t.TempDir()
	gw, c := StartClient(t)

	// Before any queue exists, queues is an object (LMQ printed []).
	r := c.Expect(http.StatusOK, http.MethodGet, "/stats", nil)
	expectJSONType(t, r)
	if !bytes.Contains(r.Body, []byte(`"queues":{}`)) {
		t.Errorf("/stats without queues: %s", r.Body)
	}

	const q = "ops/stats"
	for i := range 3 {
		c.Push(q, []byte(fmt.Sprintf("m%d", i)), "text/plain")
	}
	m := c.MustPull(q, "1", "m0")
	c.ExpectReply(http.StatusNoContent, q, m.ID(), "ack")
	c.MustPull(q, "1", "m1") // stays in flight

	t.Run("Stats", func(t *testing.T) {
		r := c.Expect(http.StatusOK, http.MethodGet, "/stats", nil)
		var st lmqexporter.Stats
		if err := json.Unmarshal(r.Body, &st); err != nil {
			t.Fatalf("an exporter's struct cannot parse /stats: %v\n%s", err, r.Body)
		}
		if len(st.ActiveNodes) == 0 || len(st.AllNodes) == 0 {
			t.Errorf("nodes %v %v", st.ActiveNodes, st.AllNodes)
		}
		s, ok := st.Queues[q]
		if !ok {
			t.Fatalf("no %q in %s", q, r.Body)
		}
		if s.Size != 2 || s.Memory <= 0 || s.Stats.Push.Count != 3 || s.Stats.Pull.Count != 2 {
			t.Errorf("size %d memory %d push %d pull %d, want 2, >0, 3, 2", s.Size, s.Memory, s.Stats.Push.Count, s.Stats.Pull.Count)
		}
		if rt := s.Stats.Retention; rt.N != 2 || rt.Min < 0 || rt.Max < rt.Min || rt.Median < rt.Min || rt.ArithmeticMean > rt.Max {
			t.Errorf("retention %+v", rt)
		}
		if s.Props["retry"] != 2.0 || s.Props["timeout"] != 30.0 {
			t.Errorf("props %v", s.Props)
		}
	})

	t.Run("Metrics", func(t *testing.T) {
		r := c.Expect(http.StatusOK, http.MethodGet, "/metrics", nil)
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("content-type %q", ct)
		}
		body := string(r.Body)
		for _, want := range []string{
			`lmq_pushes_total{queue="ops/stats"} 3`,
			`lmq_pulls_total{queue="ops/stats"} 2`,
			`lmq_acks_total{queue="ops/stats"} 1`,
			`lmq_nacks_total{queue="ops/stats"} 0`,
			`lmq_timeouts_total{queue="ops/stats"} 0`,
			`lmq_discarded_total{queue="ops/stats"} 0`,
			`lmq_queue_depth{queue="ops/stats"} 2`,
			`lmq_queue_bytes{queue="ops/stats"}`,
			`lmq_retention_seconds_count{queue="ops/stats"} 2`,
			`lmq_http_request_duration_seconds_count{code="200",method="POST",route="/messages/{name}"} 3`,
			`lmq_long_polls_waiting 0`,
			`lmq_gateway_peers 0`, // alone on its embedded NATS
			`lmq_rpc_connections 0`,
			`lmq_deliveries_in_flight 1`,
			"lmq_build_info{",
			"go_goroutines ",
			"process_resident_memory_bytes ",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	})

	t.Run("RPCConnections", func(t *testing.T) {
		conn, err := net.Dial("tcp", gw.RPCAddr)
		if err != nil {
			t.Fatal(err)
		}
		gauge := func(want string) bool {
			return testwait.Until(5*time.Second, func() bool {
				return strings.Contains(string(c.Do(http.MethodGet, "/metrics", nil).Body), "\nlmq_rpc_connections "+want+"\n")
			})
		}
		if !gauge("1") {
			t.Error("an open RPC connection is not counted")
		}
		conn.Close()
		if !gauge("0") {
			t.Error("a closed RPC connection is still counted")
		}
	})

	t.Run("Health", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/readyz"} {
			if r := c.Do(http.MethodGet, p, nil); r.Status != http.StatusOK || string(r.Body) != "ok\n" {
				t.Errorf("%s: %v", p, r)
			}
		}
		if r := c.Do(http.MethodPost, "/stats", nil); r.Status != http.StatusMethodNotAllowed {
			t.Errorf("POST /stats: %d, want 405", r.Status)
		}
	})

	t.Run("StatusCommand", func(t *testing.T) {
		out := opsRun(t, nil, "status", "--http", gw.HTTP)
		for _, want := range []string{"Active nodes:", "QUEUE", "MESSAGES", "ops/stats", `{"accum":0,"retry":2,"timeout":30}`} {
			if !strings.Contains(out, want) {
				t.Errorf("status output lacks %q:\n%s", want, out)
			}
		}
		if line := opsLine(out, "ops/stats"); len(strings.Fields(line)) < 3 || strings.Fields(line)[1] != "2" {
			t.Errorf("queue line %q, want 2 messages", line)
		}
		if v := opsRun(t, nil, "version"); !strings.HasPrefix(v, "lmq-gateway ") {
			t.Errorf("version: %q", v)
		}
	})
}

// TestOpsConfigPrecedence: flags > LMQ_* environment > config file >
// defaults, seen from outside: the bearer token, the body limit, the access
// log and the listen address each come from a different layer.
func TestOpsConfigPrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	// Run 1: the file sets everything; the environment overrides the token
	// and the body limit; a flag overrides the body limit again.
	gw := newOpsGateway(t)
	file := filepath.Join(dir, "one.conf")
	opsWriteFile(t, file, fmt.Sprintf("# lmq-gateway settings\nhttp-listen = %s\nauth-token = from-file\nmax-body = 100\naccess-log = false\n", strings.TrimPrefix(gw.HTTP, "http://")))
	gw.opsLaunch([]string{"LMQ_AUTH_TOKEN=from-env", "LMQ_MAX_BODY=200"}, "--config", file, "--max-body", "300", "--log-level", "info")
	c := gw.Client(t)
	if r := c.Do(http.MethodGet, "/stats", nil, "Authorization", "Bearer from-file"); r.Status != http.StatusUnauthorized {
		t.Errorf("the file's token, overridden by the environment: %d", r.Status)
	}
	if r := c.Do(http.MethodGet, "/stats", nil, "Authorization", "Bearer from-env"); r.Status != http.StatusOK {
		t.Errorf("the environment's token: %d", r.Status)
	}
	auth := []string{"Authorization", "Bearer from-env"}
	if r := c.Do(http.MethodPost, "/messages/cfg", bytes.Repeat([]byte("x"), 250), auth...); r.Status != http.StatusOK {
		t.Errorf("250 bytes under the flag's limit of 300: %v", r)
	}
	if r := c.Do(http.MethodPost, "/messages/cfg", bytes.Repeat([]byte("x"), 350), auth...); r.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("350 bytes over the flag's limit of 300: %d, want 413", r.Status)
	}
	if r := c.Do(http.MethodGet, "/healthz", nil); r.Status != http.StatusOK {
		t.Errorf("/healthz must not ask for credentials: %d", r.Status)
	}
	if strings.Contains(gw.Output(), `msg="http request"`) {
		t.Errorf("access-log = false in the file, but requests were logged")
	}

	// Run 2: the file alone gives the token; the access log is on by default.
	gw2 := newOpsGateway(t)
	file2 := filepath.Join(dir, "two.conf")
	opsWriteFile(t, file2, "auth-token = \"from-file\"  # quoted\n")
	gw2.opsLaunch(nil, "--config", file2, "--http-listen", strings.TrimPrefix(gw2.HTTP, "http://"), "--log-level", "info")
	c2 := gw2.Client(t)
	if r := c2.Do(http.MethodGet, "/stats", nil, "Authorization", "Bearer from-file"); r.Status != http.StatusOK {
		t.Errorf("the file's token: %d", r.Status)
	}
	if r := c2.Do(http.MethodGet, "/stats", nil); r.Status != http.StatusUnauthorized || r.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("no token: %v", r)
	}
	if !testwait.Until(5*time.Second, func() bool { return strings.Contains(gw2.Output(), `msg="http request" method=GET path=/stats`) }) {
		t.Errorf("no access log line in:\n%s", gw2.Output())
	}
	// The status command takes the token too.
	if out := opsRun(t, []string{"LMQ_AUTH_TOKEN=from-file"}, "status", "--http", gw2.HTTP); !strings.Contains(out, "No queues.") {
		t.Errorf("status with the token: %q", out)
	}

	// A bad file stops the start with a clear message.
	bad := filepath.Join(dir, "bad.conf")
	opsWriteFile(t, bad, "http-listen = 127.0.0.1:1\nno-such-setting = 1\n")
	cmd := exec.Command(gatewayBinary, "--config", bad)
	cmd.Env = opsEnv()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `bad.conf:2: unknown setting "no-such-setting"`) {
		t.Errorf("bad config file: %v %s", err, out)
	}
}

// TestOpsHTTPS serves the API over TLS with a certificate of a throw-away CA.
func TestOpsHTTPS(t *testing.T) {
	t.Parallel()
	pki := testpki.Write(t, t.TempDir())
	certFile, keyFile := pki["server.pem"], pki["server-key.pem"]
	caPEM, err := os.ReadFile(pki["ca.pem"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("no certificate in ca.pem")
	}
	gw := newOpsGateway(t)
	gw.HTTP = strings.Replace(gw.HTTP, "http://", "https://", 1)
	gw.hc.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
	gw.opsLaunch(nil, "--http-listen", strings.TrimPrefix(gw.HTTP, "https://"), "--tls-cert", certFile, "--tls-key", keyFile)
	c := gw.Client(t)
	c.Push("tls", []byte("secret"), "text/plain")
	c.MustPull("tls", "0", "secret")
	if out := opsRun(t, nil, "status", "--http", gw.HTTP, "--insecure"); !strings.Contains(out, "tls") {
		t.Errorf("status over https: %q", out)
	}
	// Plain HTTP on the TLS port gets no API answer.
	resp, err := http.Get(strings.Replace(gw.HTTP, "https://", "http://", 1) + "/stats")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP served on the TLS port")
		}
	}
}

// TestOpsGracefulShutdown sends SIGTERM while a long-poll waits, pushes are
// under way and a delivery is unanswered: the long-poll answers 204 at once,
// the process exits cleanly, and after a restart every acknowledged push is
// there, the unanswered delivery included, available at once.
func TestOpsGracefulShutdown(t *testing.T) {
	t.Parallel()
	// A temp dir first: its removal, registered now, then runs after the
	// harness has stopped the gateway (Start takes its data dir later).
	_ = t.TempDir()
	gw, c := StartClient(t, "--shutdown-timeout", "15s")
	const q, empty = "ops-shutdown", "ops-shutdown-empty"
	for i := range 5 {
		c.Push(q, []byte(fmt.Sprintf("pre-%d", i)), "")
	}
	// Never answered: the shutdown releases it, so the drain below (t=0)
	// finds it at once instead of after its 30 s timeout.
	c.MustPull(q, "1", "pre-0")

	var wg sync.WaitGroup
	var poll *Response
	var pollErr error
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		poll, pollErr = c.Send(ctx, http.MethodGet, "/messages/"+empty+"?t=30", nil)
	})
	var mu sync.Mutex
	var accepted []string
	var answered atomic.Int64
	wg.Go(func() {
		for i := 0; i < 10000; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			body := fmt.Sprintf("live-%d", i)
			r, err := c.Send(ctx, http.MethodPost, "/messages/"+q, []byte(body))
			cancel()
			if err != nil {
				return // the listener is gone
			}
			answered.Add(1)
			if r.Status == http.StatusOK {
				mu.Lock()
				accepted = append(accepted, body)
				mu.Unlock()
			}
		}
	})
	// SIGTERM once the long-poll waits and pushes are flowing (20 of them
	// answered, at the machine's pace: only a push that gets no answer at
	// all for loadStall fails the test).
	awaitWaitingPulls(t, c, 1)
	awaitProgress(t, loadStall, "pushes answered before the SIGTERM", answered.Load, func() (bool, string) {
		n := answered.Load()
		return n >= 20, fmt.Sprintf("%d answered", n)
	})
	gw.Stop() // fails the test unless the process exits 0 in time
	wg.Wait()

	if pollErr != nil {
		t.Errorf("waiting long-poll: %v, want 204", pollErr)
	} else if poll.Status != http.StatusNoContent {
		t.Errorf("waiting long-poll: %d after %v, want 204", poll.Status, poll.Elapsed)
	}

	gw.Restart()
	want := map[string]bool{}
	for i := range 5 {
		want[fmt.Sprintf("pre-%d", i)] = true
	}
	for _, b := range accepted {
		want[b] = true
	}
	got := map[string]int{}
	start := time.Now()
	for {
		r := c.Pull(q, "0") // t=0: a message held back for its timeout would be missed
		if r.Status == http.StatusNoContent {
			break
		}
		if r.Status != http.StatusOK {
			t.Fatalf("drain: %v", r)
		}
		got[string(r.Body)]++
		c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
		if len(got) > len(want)+10 {
			t.Fatalf("drained more than was pushed: %d", len(got))
		}
	}
	for b := range want {
		if got[b] == 0 {
			t.Errorf("acknowledged message %q lost", b)
		}
	}
	for b, n := range got {
		if n > 1 {
			t.Errorf("message %q delivered %d times", b, n)
		}
		if !want[b] && !strings.HasPrefix(b, "live-") {
			t.Errorf("unexpected message %q", b)
		}
	}
	t.Logf("%d pushes accepted during the shutdown window; %d messages drained in %v", len(accepted), len(got), time.Since(start))
}

// TestOpsSecondSignal: while a request holds the shutdown up, a second
// SIGTERM ends the process at once.
func TestOpsSecondSignal(t *testing.T) {
	t.Parallel()
	// A temp dir first: its removal, registered now, then runs after the
	// harness has stopped the gateway (Start takes its data dir later).
	_ = t.TempDir()
	gw := Start(t, "--shutdown-timeout", "60s")
	conn, err := net.Dial("tcp", strings.TrimPrefix(gw.HTTP, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A push whose body never arrives keeps its request in flight. Its
	// handler is running once the gateway asks for the body: net/http
	// answers "100 Continue" to the Expect header at the handler's first
	// read of it.
	if _, err := fmt.Fprintf(conn, "POST /messages/ops-slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(startTimeout))
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 100 ") {
		t.Fatalf("the push's handler did not ask for its body: %q %v", status, err)
	}
	if _, err := fmt.Fprint(conn, "abc"); err != nil {
		t.Fatal(err)
	}
	p := gw.proc
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		t.Fatalf("exited on the first signal with a request in flight (%v)", p.err)
	case <-time.After(time.Second):
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	// The exit status says which signal ended it (2: the second); the bound
	// is a safety net beyond the 60 s shutdown timeout, which would end it
	// with another status.
	select {
	case <-p.exited:
	case <-time.After(2 * time.Minute):
		t.Fatal("still running 2 minutes after the second signal")
	}
	gw.proc = nil
	if ee, ok := p.err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("exit after the second signal: %v, want status 2", p.err)
	}
}

// newOpsGateway prepares a gateway whose process is started by opsLaunch, with
// its own environment and arguments (Start would pass --http-listen and wait
// for an API answer, which authentication refuses).
func newOpsGateway(t *testing.T) *Gateway {
	_ = t.TempDir() // see TestOpsEndpoints
	g := newGateway(t)
	g.DataDir = t.TempDir()
	g.NATSURL = "nats://" + anyPort
	g.args = []string{"--rpc-listen", anyPort, "--nats-listen", anyPort, "--data-dir", g.DataDir}
	return g
}

// opsLaunch starts the process with env added to a clean environment and
// waits until it has bound its ports and /healthz answers.
func (g *Gateway) opsLaunch(env []string, args ...string) {
	g.t.Helper()
	g.args = append(g.args, args...)
	launchGateway(g, append(opsEnv(), env...))
	if err := awaitGateways([]*Gateway{g}); err != nil {
		g.t.Fatal(err)
	}
}

// opsEnv is the test's environment without LMQ_* settings.
func opsEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LMQ_") {
			out = append(out, kv)
		}
	}
	return out
}

// opsRun runs a short lmq-gateway command and returns its standard output.
func opsRun(t *testing.T, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gatewayBinary, args...)
	cmd.Env = append(opsEnv(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lmq-gateway %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

func opsWriteFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func opsLine(text, sub string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
