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

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func start(t *testing.T, o Options) *Server {
	t.Helper()
	s, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
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

// The client port wants the generated password; the file has it, with
// mode 0600, and the next start reuses it.
func TestGeneratedCredentials(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := freeAddr(t)
	s := start(t, Options{DataDir: dir, Listen: addr})

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
	nc, err := nats.Connect(u)
	if err != nil {
		t.Fatalf("with the file's URL: %v", err)
	}
	nc.Close()
	// The program's own in-process connection authenticates too.
	nc, err = s.Connect("test")
	if err != nil {
		t.Fatalf("in-process: %v", err)
	}
	nc.Close()

	s.Shutdown(context.Background())
	start(t, Options{DataDir: dir, Listen: addr})
	if again := readURL(t, dir); again != u {
		t.Fatalf("after restart the URL is %q, was %q", again, u)
	}
	nc, err = nats.Connect(u)
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	nc.Close()
}

// A given password is required and not written down; None opens the port.
func TestExplicitCredentialsAndNone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := freeAddr(t)
	start(t, Options{DataDir: dir, Listen: addr, ClientAuth: ClientAuth{User: "u", Password: "p4ss"}})
	if _, err := os.Stat(filepath.Join(dir, ClientURLFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("client URL file with a given password: %v", err)
	}
	if _, err := nats.Connect("nats://u:wrong@" + addr); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("wrong password: %v", err)
	}
	nc, err := nats.Connect("nats://u:p4ss@" + addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()

	addr2 := freeAddr(t)
	start(t, Options{DataDir: t.TempDir(), Listen: addr2, ClientAuth: ClientAuth{None: true}})
	nc, err = nats.Connect("nats://" + addr2)
	if err != nil {
		t.Fatalf("open port: %v", err)
	}
	nc.Close()
}

// A second server on a locked directory fails at once and names the
// holder; after a shutdown the directory is free again.
func TestDataDirLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := start(t, Options{DataDir: dir})
	_, err := Start(Options{DataDir: dir})
	if !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("second start: %v, want ErrDataDirLocked", err)
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("message %q does not name %s and pid %d", msg, dir, os.Getpid())
	}
	s.Shutdown(context.Background())
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
	_, err := Start(Options{DataDir: dir, Listen: freeAddr(t)})
	if err == nil || !strings.Contains(err.Error(), "no password") {
		t.Fatalf("start with a password-less file: %v", err)
	}
	// The failed start released the lock.
	start(t, Options{DataDir: dir})
}
