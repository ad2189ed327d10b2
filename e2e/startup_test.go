package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/embedded"
)

// startupWait is how long a start that should fail may run before the test
// gives up on it. It is a safety net, not an assertion: a failure to start
// is expected at once, but the machine may be loaded.
const startupWait = 60 * time.Second

// TestStartFailures: every failure to start ends the process with a
// non-zero exit and a last line naming the cause and the flag to change
// (issue 16, item 1). Before, a taken NATS port or an unusable data
// directory waited 30 s for "embedded: nats-server not ready in time".
func TestStartFailures(t *testing.T) {
	t.Parallel()
	// hold takes a loopback port for the test's duration.
	hold := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l.Addr().String()
	}
	for _, tc := range []struct {
		name string
		// args returns the flags of the failing start (added to free
		// ports and a fresh data directory) and the words the last line
		// must contain.
		args func(t *testing.T, dataDir string) ([]string, []string)
	}{
		{"nats port in use", func(t *testing.T, _ string) ([]string, []string) {
			a := hold(t)
			return []string{"--nats-listen", a}, []string{"--nats-listen " + a, "address already in use"}
		}},
		{"cluster port in use", func(t *testing.T, _ string) ([]string, []string) {
			a := hold(t)
			return []string{"--server-name", "n1", "--cluster-name", "c", "--cluster-listen", a, "--routes", "nats://" + a},
				[]string{"--cluster-listen " + a, "address already in use"}
		}},
		{"http port in use", func(t *testing.T, _ string) ([]string, []string) {
			a := hold(t)
			return []string{"--http-listen", a}, []string{"--http-listen " + a, "address already in use"}
		}},
		{"rpc port in use", func(t *testing.T, _ string) ([]string, []string) {
			a := hold(t)
			return []string{"--rpc-listen", a}, []string{"--rpc-listen " + a, "address already in use"}
		}},
		{"data dir not creatable", func(t *testing.T, dataDir string) ([]string, []string) {
			file := filepath.Join(dataDir, "file")
			if err := os.WriteFile(file, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			d := filepath.Join(file, "sub")
			return []string{"--data-dir", d}, []string{"--data-dir " + d, "cannot be created", "not a directory"}
		}},
		{"data dir not writable", func(t *testing.T, dataDir string) ([]string, []string) {
			d := filepath.Join(dataDir, "ro")
			if os.Geteuid() == 0 {
				// Permissions do not stop root; /proc does.
				if runtime.GOOS != "linux" {
					t.Skip("needs a directory root cannot write to")
				}
				d = "/proc/self"
			} else {
				if err := os.Mkdir(d, 0o500); err != nil {
					t.Fatal(err)
				}
			}
			return []string{"--data-dir", d}, []string{"--data-dir " + d, "is not writable"}
		}},
		{"data dir locked", func(t *testing.T, dataDir string) ([]string, []string) {
			if runtime.GOOS == "windows" {
				t.Skip("flock")
			}
			f, err := os.OpenFile(filepath.Join(dataDir, embedded.LockFile), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				t.Fatal(err)
			}
			return nil, []string{"--data-dir", dataDir, "used by another process"}
		}},
		{"bad tls files", func(t *testing.T, dataDir string) ([]string, []string) {
			c := filepath.Join(dataDir, "missing.pem")
			return []string{"--tls-cert", c, "--tls-key", c}, []string{"--tls-cert " + c, "no such file"}
		}},
		{"bad rpc tls files", func(t *testing.T, dataDir string) ([]string, []string) {
			c := filepath.Join(dataDir, "garbage.pem")
			if err := os.WriteFile(c, []byte("not PEM"), 0o600); err != nil {
				t.Fatal(err)
			}
			return []string{"--rpc-tls-cert", c, "--rpc-tls-key", c}, []string{"--rpc-tls-cert " + c, "PEM"}
		}},
		{"nats host not resolving", func(*testing.T, string) ([]string, []string) {
			// Retried like an unreachable server (it may appear in DNS
			// with its container) until --nats-wait.
			return []string{"--nats-url", "nats://nats-1.invalid:4222", "--nats-wait", "2s"},
				[]string{"--nats-url", "--nats-wait 2s", "nats-1.invalid"}
		}},
		{"nats unreachable", func(t *testing.T, _ string) ([]string, []string) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			a := l.Addr().String()
			l.Close()
			return []string{"--nats-url", "nats://" + a, "--nats-wait", "2s"}, []string{"--nats-url", "--nats-wait 2s", a}
		}},
		{"replicas 0", func(*testing.T, string) ([]string, []string) {
			return []string{"--replicas", "0"}, []string{"--replicas 0", "want 1 to 5"}
		}},
		{"replicas -3", func(*testing.T, string) ([]string, []string) {
			return []string{"--replicas", "-3"}, []string{"--replicas -3", "want 1 to 5"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dataDir := t.TempDir()
			extra, want := tc.args(t, dataDir)
			args := append([]string{
				"--http-listen", anyPort,
				"--rpc-listen", anyPort,
				"--nats-listen", anyPort,
				"--data-dir", dataDir,
				"--log-level", "warn",
			}, extra...) // later flags win
			ctx, cancel := context.WithTimeout(context.Background(), startupWait)
			defer cancel()
			cmd := exec.CommandContext(ctx, gatewayBinary, args...)
			setDeathSignal(cmd)
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("still running after %v:\n%s", startupWait, out)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("%v, want a non-zero exit:\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			last := lines[len(lines)-1]
			if !strings.HasPrefix(last, "lmq-gateway: ") {
				t.Errorf("last line %q is not the process's error:\n%s", last, out)
			}
			for _, w := range want {
				if !strings.Contains(last, w) {
					t.Errorf("last line %q lacks %q", last, w)
				}
			}
			if strings.Contains(string(out), "not ready in time") {
				t.Errorf("the start waited for the server's readiness:\n%s", out)
			}
		})
	}
}

// TestMigrateToNATSCredentials: migrate reaches a NATS port that requires
// a user and password with --to-nats-user and --to-nats-password (issue
// 16, item 5), and a wrong password fails at once with the server's answer.
func TestMigrateToNATSCredentials(t *testing.T) {
	t.Parallel()
	src := Start(t)
	src.Client(t).Push("migrate/creds", []byte("hello"), "text/plain")
	dst := Start(t, "--nats-listen-user", "mig", "--nats-listen-password", "s3cret")
	hostPort := natsHostPort(t, dst.NATSURL)
	run := func(password string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), startupWait)
		defer cancel()
		cmd := exec.CommandContext(ctx, gatewayBinary, "migrate",
			"--from", src.HTTP, "--to-nats", "nats://"+hostPort,
			"--to-nats-user", "mig", "--to-nats-password", password,
			"--linger", "1s", "--progress", "-1s")
		setDeathSignal(cmd)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("wrong"); err == nil || !strings.Contains(strings.ToLower(out), "authorization") {
		t.Errorf("wrong password: %v, want a failure naming the authorization error:\n%s", err, out)
	}
	out, err := run("s3cret")
	if err != nil {
		t.Fatalf("migrate with credentials: %v\n%s", err, out)
	}
	dst.Client(t).MustPull("migrate/creds", "5", "hello")
}
