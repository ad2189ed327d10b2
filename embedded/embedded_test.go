package embedded

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// anyPort asks for a client port the kernel picks (see splitHostPort); a
// test reads the one bound from ClientAddr.
const anyPort = "127.0.0.1:0"

// startErr makes the server of o and starts it: the contract's two steps.
func startErr(o Options) (*Server, error) {
	s := New(o)
	if err := s.Start(context.Background()); err != nil {
		return nil, err
	}
	return s, nil
}

func start(t *testing.T, o Options) *Server {
	t.Helper()
	s, err := startErr(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func readURL(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ClientURLFile))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// connect connects a client to url and hangs up; a failure is reported
// with what, the case the connection stands for.
func connect(t *testing.T, url, what string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	nc.Close()
}

// The client port wants the generated password; the file has it, with
// mode 0600, and the next start reuses it.
func TestGeneratedCredentials(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := start(t, Options{DataDir: dir, Listen: anyPort})
	addr := s.ClientAddr()

	if nc, err := nats.Connect("nats://"+addr, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("connected without credentials")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("without credentials: %v, want an authorization error", err)
	}
	u := readURL(t, dir)
	if !strings.HasPrefix(u, "nats://"+DefaultUser+":") || !strings.HasSuffix(u, "@"+addr) {
		t.Fatalf("client URL %q", u)
	}
	fi, err := os.Stat(filepath.Join(dir, ClientURLFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	connect(t, u, "with the file's URL")
	// The program's own in-process connection authenticates too.
	nc, err := s.Connect("test")
	if err != nil {
		t.Fatalf("in-process: %v", err)
	}
	nc.Close()

	s.Stop()
	// The same port again: it was this test's until the shutdown, and the
	// URL in the file names it.
	start(t, Options{DataDir: dir, Listen: addr})
	if again := readURL(t, dir); again != u {
		t.Fatalf("after restart the URL is %q, was %q", again, u)
	}
	connect(t, u, "after restart")
}

// A given password is required and not written down; None opens the port.
func TestExplicitCredentialsAndNone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := start(t, Options{DataDir: dir, Listen: anyPort, ClientAuth: ClientAuth{User: "u", Password: "p4ss"}}).ClientAddr()
	if _, err := os.Stat(filepath.Join(dir, ClientURLFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("client URL file with a given password: %v", err)
	}
	if _, err := nats.Connect("nats://u:wrong@" + addr); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("wrong password: %v", err)
	}
	connect(t, "nats://u:p4ss@"+addr, "with the given password")

	addr2 := start(t, Options{DataDir: t.TempDir(), Listen: anyPort, ClientAuth: ClientAuth{None: true}}).ClientAddr()
	connect(t, "nats://"+addr2, "open port")
}

// A second server on a locked directory fails at once and names the
// holder; after a shutdown the directory is free again.
func TestDataDirLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := start(t, Options{DataDir: dir})
	_, err := startErr(Options{DataDir: dir})
	if !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("second start: %v, want ErrDataDirLocked", err)
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("message %q does not name %s and pid %d", msg, dir, os.Getpid())
	}
	s.Stop()
	start(t, Options{DataDir: dir})
}

// A damaged credentials file stops the start with a message that does not
// repeat its contents.
func TestBadCredentialsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ClientURLFile), []byte("nats://lmq@127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := startErr(Options{DataDir: dir, Listen: anyPort})
	if err == nil || !strings.Contains(err.Error(), "no password") {
		t.Fatalf("start with a password-less file: %v", err)
	}
	// The failed start released the lock.
	start(t, Options{DataDir: dir})
}

// Port 0 binds a port the kernel picks, for the client and the cluster
// listener alike (nats-server itself reads 0 as 4222, or as no cluster
// listener), and ClientAddr and ClusterAddr report them.
func TestPortZero(t *testing.T) {
	t.Parallel()
	// A JetStream cluster node needs a route; this one leads to a listener
	// the test holds (and never serves) until the end.
	peer, err := net.Listen("tcp", anyPort)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	s := start(t, Options{DataDir: t.TempDir(), Listen: anyPort, ServerName: "n0",
		ClusterName: "c", ClusterListen: anyPort, Routes: []string{"nats-route://" + peer.Addr().String()},
		ClientAuth: ClientAuth{None: true}})
	for what, addr := range map[string]string{"client": s.ClientAddr(), "cluster": s.ClusterAddr()} {
		_, port, err := net.SplitHostPort(addr)
		if err != nil || port == "0" || port == "4222" {
			t.Fatalf("%s address %q (%v), want a port the kernel picked", what, addr, err)
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("%s address %s: %v", what, addr, err)
		}
		c.Close()
	}
	if s.ClientAddr() == s.ClusterAddr() {
		t.Fatalf("client and cluster share %s", s.ClientAddr())
	}
}
