package e2e

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// natsHostPort is the host:port of a NATS URL, without credentials.
func natsHostPort(t *testing.T, natsURL string) string {
	t.Helper()
	u, err := url.Parse(natsURL)
	if err != nil {
		t.Fatalf("NATS URL: %v", err)
	}
	return u.Host
}

// expectAuthRefused asserts that the NATS server at natsURL refuses the
// connection as unauthorized.
func expectAuthRefused(t *testing.T, natsURL string) {
	t.Helper()
	nc, err := nats.Connect(natsURL, nats.MaxReconnects(0), nats.Timeout(startTimeout))
	if err == nil {
		nc.Close()
		t.Fatalf("connected to %s without valid credentials", natsHostPort(t, natsURL))
	}
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("connect without valid credentials: %v, want an authorization violation", err)
	}
}

// expectNATSWorks connects with natsURL and reads a queue's stream the
// gateway created: the credentials reach the account with the queues.
func expectNATSWorks(t *testing.T, natsURL, queue string) {
	t.Helper()
	nc, err := nats.Connect(natsURL, nats.MaxReconnects(0), nats.Timeout(startTimeout))
	if err != nil {
		t.Fatalf("connect to %s: %v", natsHostPort(t, natsURL), err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	n, err := mapping.NativeNames(queue)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := js.Stream(ctx, n.Stream); err != nil {
		t.Fatalf("stream %s of queue %q over NATS: %v", n.Stream, queue, err)
	}
}

// TestNATSPortNeedsCredentials: the embedded server's client port refuses
// clients without the password the gateway generated on its first start;
// the URL in the data directory (mode 0600) gets in, and still does after
// a restart.
func TestNATSPortNeedsCredentials(t *testing.T) {
	t.Parallel()
	gw, c := StartClient(t)
	const q = "natsauth/generated"
	c.PatchProps(q, `{"retry":1}`)

	file := filepath.Join(gw.DataDir, embedded.ClientURLFile)
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatalf("client URL file: %v", err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("%s has mode %v, want 0600", file, perm)
	}
	u, err := url.Parse(gw.NATSURL)
	if err != nil || u.User == nil || u.User.Username() != embedded.DefaultUser {
		t.Fatalf("client URL %s (%v): want user %s", u.Redacted(), err, embedded.DefaultUser)
	}
	password, _ := u.User.Password()
	if len(password) < 22 { // 128 bits in base64
		t.Errorf("generated password of %d characters: too short", len(password))
	}

	hostPort := natsHostPort(t, gw.NATSURL)
	expectAuthRefused(t, "nats://"+hostPort)
	expectAuthRefused(t, "nats://"+embedded.DefaultUser+":wrong@"+hostPort)
	expectNATSWorks(t, gw.NATSURL, q)

	before := gw.NATSURL
	gw.Restart()
	if gw.NATSURL != before {
		t.Errorf("the URL changed across a restart")
	}
	expectAuthRefused(t, "nats://"+hostPort)
	expectNATSWorks(t, gw.NATSURL, q)
	c.Push(q, []byte("after restart"), "text/plain")
	c.MustPull(q, "5", "after restart")
}

// TestNATSPortClosedWithHTTPAuth: with HTTP authentication on, the NATS
// port is no way around it (the finding of issue 15, item 3).
func TestNATSPortClosedWithHTTPAuth(t *testing.T) {
	t.Parallel()
	gw := newOpsGateway(t)
	gw.opsLaunch([]string{"LMQ_AUTH_TOKEN=secret"}, "--http-listen", strings.TrimPrefix(gw.HTTP, "http://"))
	expectAuthRefused(t, "nats://"+natsHostPort(t, gw.NATSURL))
	nc, err := nats.Connect(gw.NATSURL, nats.MaxReconnects(0))
	if err != nil {
		t.Fatalf("with the data directory's URL: %v", err)
	}
	nc.Close()
}

// TestNATSPortExplicitCredentials: a user and password given by the
// operator are the ones required, and are not written into the data
// directory.
func TestNATSPortExplicitCredentials(t *testing.T) {
	t.Parallel()
	gw := Start(t, "--nats-listen-user", "alice", "--nats-listen-password", "correct horse battery staple")
	const q = "natsauth/explicit"
	gw.Client(t).PatchProps(q, `{"retry":1}`)
	if _, err := os.Stat(filepath.Join(gw.DataDir, embedded.ClientURLFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("client URL file with a given password: %v, want none", err)
	}
	hostPort := natsHostPort(t, gw.NATSURL)
	expectAuthRefused(t, "nats://"+hostPort)
	expectAuthRefused(t, "nats://lmq:correct%20horse%20battery%20staple@"+hostPort)
	expectNATSWorks(t, "nats://alice:correct%20horse%20battery%20staple@"+hostPort, q)
}

// TestNATSPortOpenOnlyWhenAsked: --nats-listen-auth none opens the port,
// with a warning in the log.
func TestNATSPortOpenOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	gw := Start(t, "--nats-listen-auth", "none")
	const q = "natsauth/none"
	gw.Client(t).PatchProps(q, `{"retry":1}`)
	if _, err := os.Stat(filepath.Join(gw.DataDir, embedded.ClientURLFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("client URL file for an open port: %v, want none", err)
	}
	expectNATSWorks(t, "nats://"+natsHostPort(t, gw.NATSURL), q)
	if out := gw.Output(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "EMBEDDED NATS PORT IS OPEN") {
		t.Errorf("no warning about the open port in the log:\n%s", out)
	}
}

// TestDataDirLocked: a second gateway on a data directory in use exits with
// an error naming the directory and the process holding it, and the first
// keeps serving (issue 15, item 10).
func TestDataDirLocked(t *testing.T) {
	t.Parallel()
	gw, c := StartClient(t)
	const q = "natsauth/lock"
	c.Push(q, []byte("before"), "text/plain")

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, gatewayBinary,
		"--http-listen", anyPort,
		"--rpc-listen", anyPort,
		"--nats-listen", anyPort,
		"--data-dir", gw.DataDir,
	)
	setDeathSignal(cmd)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("second gateway on %s still running after %v:\n%s", gw.DataDir, startTimeout, out)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("second gateway on %s: %v, want a non-zero exit:\n%s", gw.DataDir, err, out)
	}
	pid := strconv.Itoa(gw.proc.cmd.Process.Pid)
	if !strings.Contains(string(out), gw.DataDir) || !strings.Contains(string(out), "pid "+pid) {
		t.Errorf("message does not name %s and pid %s:\n%s", gw.DataDir, pid, out)
	}

	r := c.MustPull(q, "5", "before")
	c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	c.Push(q, []byte("after"), "text/plain")
	r = c.MustPull(q, "5", "after")
	c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")

	// The lock goes with the process, even with kill -9.
	gw.Kill()
	gw.Restart()
	c.Push(q, []byte("after kill"), "text/plain")
	c.MustPull(q, "5", "after kill")
}
