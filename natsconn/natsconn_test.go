package natsconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/logbuf"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testpki"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		err  string // substring; "" means valid
	}{
		{"one URL", Options{URLs: "nats://127.0.0.1:4222"}, ""},
		{"several URLs with blanks", Options{URLs: " nats://a:4222 , tls://b:4222,,nats://c:4222 "}, ""},
		{"none", Options{URLs: " , "}, "no NATS server"},
		{"no scheme", Options{URLs: "127.0.0.1:4222"}, ""},
		{"no host", Options{URLs: "nats://"}, "host"},
		{"user and password", Options{URLs: "nats://a:1", User: "u", Password: "p"}, ""},
		{"password alone", Options{URLs: "nats://a:1", Password: "p"}, "needs a user"},
		{"creds and token", Options{URLs: "nats://a:1", CredsFile: "x.creds", Token: "t"}, "only one"},
		{"user and token", Options{URLs: "nats://a:1", User: "u", Token: "t"}, "only one"},
		{"cert without key", Options{URLs: "nats://a:1", CertFile: "c.pem"}, "go together"},
		{"cert and key and CA", Options{URLs: "nats://a:1", CertFile: "c.pem", KeyFile: "k.pem", CAFile: "ca.pem"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("Validate: %v, want an error containing %q", err, tc.err)
			}
		})
	}
}

func TestServers(t *testing.T) {
	got := Options{URLs: " nats://a:1,, b:2 "}.Servers()
	if len(got) != 2 || got[0] != "nats://a:1" || got[1] != "nats://b:2" {
		t.Fatalf("Servers: %q", got)
	}
}

func TestNATSOptionsApplied(t *testing.T) {
	// The option only checks that the file exists; it is read on connect.
	dir := t.TempDir()
	creds := filepath.Join(dir, "user.creds")
	if err := os.WriteFile(creds, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	pki := testpki.Write(t, dir)
	o := Options{URLs: "nats://a:1", Name: "gw-1", CredsFile: creds, CAFile: pki["ca.pem"], ReconnectWait: 3 * time.Second}
	opts, err := o.NATSOptions()
	if err != nil {
		t.Fatal(err)
	}
	no := nats.GetDefaultOptions()
	for _, opt := range opts {
		if err := opt(&no); err != nil {
			t.Fatal(err)
		}
	}
	if no.MaxReconnect != -1 {
		t.Errorf("MaxReconnect %d, want -1 (forever)", no.MaxReconnect)
	}
	if no.ReconnectWait != 3*time.Second {
		t.Errorf("ReconnectWait %v, want the option's 3s", no.ReconnectWait)
	}
	if no.ReconnectBufSize != DefaultReconnectBufSize {
		t.Errorf("ReconnectBufSize %d", no.ReconnectBufSize)
	}
	if no.PingInterval != DefaultPingInterval || no.MaxPingsOut != DefaultMaxPingsOut {
		t.Errorf("pings %v/%d", no.PingInterval, no.MaxPingsOut)
	}
	if no.Name != "gw-1" {
		t.Errorf("Name %q", no.Name)
	}
	if no.UserJWT == nil || no.SignatureCB == nil {
		t.Error("credentials file not applied")
	}
	if !no.Secure || no.RootCAsCB == nil {
		t.Error("CA file not applied")
	}
	for _, h := range []struct {
		name string
		set  bool
	}{
		{"disconnect", no.DisconnectedErrCB != nil},
		{"reconnect", no.ReconnectedCB != nil},
		{"closed", no.ClosedCB != nil},
		{"async error", no.AsyncErrorCB != nil},
		{"discovered servers", no.DiscoveredServersCB != nil},
		{"lame duck", no.LameDuckModeHandler != nil},
	} {
		if !h.set {
			t.Errorf("no %s handler", h.name)
		}
	}
}

func TestRedact(t *testing.T) {
	got := redact([]string{"nats://u:secret@a:1", "nats://tok@b:2", "nats://c:3"})
	if strings.Contains(got, "secret") || strings.Contains(got, "tok@") {
		t.Fatalf("redact left a secret: %s", got)
	}
	if !strings.Contains(got, "nats://u:xxxxx@a:1") || !strings.Contains(got, "nats://c:3") {
		t.Fatalf("redact: %s", got)
	}
}

// runServer starts an in-process nats-server configured by edit on a free
// loopback port and returns it; it is shut down when t ends.
func runServer(t *testing.T, edit func(*server.Options)) *server.Server {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true}
	if edit != nil {
		edit(opts)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

func testLogger(t *testing.T) (*slog.Logger, *logbuf.Buffer) {
	buf := &logbuf.Buffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

func connectCtx(t *testing.T, o Options) (*nats.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := Connect(ctx, o)
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

func TestConnectUserPassword(t *testing.T) {
	s := runServer(t, func(o *server.Options) { o.Username, o.Password = "lmq", "s3cret" })
	log, _ := testLogger(t)
	if _, err := connectCtx(t, Options{URLs: s.ClientURL(), User: "lmq", Password: "s3cret", Logger: log}); err != nil {
		t.Fatalf("right password: %v", err)
	}
	// Not retried: Connect logs every attempt it repeats, and there is none.
	wrongLog, buf := testLogger(t)
	_, err := connectCtx(t, Options{URLs: s.ClientURL(), User: "lmq", Password: "wrong", Logger: wrongLog})
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("wrong password: %v, want an authorization error", err)
	}
	if n := strings.Count(buf.String(), "no NATS server reachable yet"); n != 0 {
		t.Errorf("an authorization failure was retried (%d attempts logged): it must not be:\n%s", n, buf.String())
	}
}

func TestConnectToken(t *testing.T) {
	s := runServer(t, func(o *server.Options) { o.Authorization = "t0ken" })
	log, _ := testLogger(t)
	if _, err := connectCtx(t, Options{URLs: s.ClientURL(), Token: "t0ken", Logger: log}); err != nil {
		t.Fatalf("right token: %v", err)
	}
	if _, err := connectCtx(t, Options{URLs: s.ClientURL(), Token: "nope", Logger: log}); err == nil {
		t.Fatal("wrong token accepted")
	}
}

func TestConnectMutualTLS(t *testing.T) {
	dir := t.TempDir()
	files := testpki.Write(t, dir)
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: files["server.pem"], KeyFile: files["server-key.pem"], CaFile: files["ca.pem"], Verify: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := runServer(t, func(o *server.Options) {
		o.TLS, o.TLSVerify, o.TLSConfig, o.TLSTimeout = true, true, tc, 2
	})
	url := strings.Replace(s.ClientURL(), "nats://", "tls://", 1)
	log, _ := testLogger(t)
	nc, err := connectCtx(t, Options{URLs: url, CAFile: files["ca.pem"], CertFile: files["client.pem"], KeyFile: files["client-key.pem"], Logger: log})
	if err != nil {
		t.Fatalf("mutual TLS: %v", err)
	}
	if _, err := nc.TLSConnectionState(); err != nil {
		t.Fatalf("connection is not TLS: %v", err)
	}
	if _, err := connectCtx(t, Options{URLs: url, CAFile: files["ca.pem"], Logger: log}); err == nil {
		t.Fatal("connected without the client certificate the server requires")
	}
}

// TestConnectWaitsForServer: the gateway may start before NATS does.
func TestConnectWaitsForServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	log, buf := testLogger(t)
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		nc, err := Connect(ctx, Options{URLs: fmt.Sprintf("nats://127.0.0.1:%d", port), Logger: log})
		done <- result{nc, err}
	}()
	testwait.For(t, "a failed attempt logged", func() bool {
		return strings.Contains(buf.String(), "no NATS server reachable yet")
	})
	runServer(t, func(o *server.Options) { o.Port = port })
	r := <-done
	if r.err != nil {
		t.Fatalf("Connect: %v", r.err)
	}
	r.nc.Close()
	if !strings.Contains(buf.String(), "no NATS server reachable yet") {
		t.Errorf("the wait was not logged:\n%s", buf.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := Connect(ctx, Options{URLs: "nats://127.0.0.1:1", Logger: log}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Connect to nothing: %v, want the context's deadline", err)
	}
}

// TestConnectWaitsForUnresolvedName: a server name that does not resolve
// (yet) is retried like a server that does not answer, each attempt logged,
// until the context ends (issue 16). The test ends the context once two
// attempts were logged, however long the resolver takes to give up.
func TestConnectWaitsForUnresolvedName(t *testing.T) {
	log, buf := testLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		// .invalid never resolves (RFC 6761).
		_, err := Connect(ctx, Options{URLs: "nats://nats-1.invalid:4222", Logger: log})
		done <- err
	}()
	testwait.ForDetail(t, "two attempts logged", func() (bool, string) {
		return strings.Count(buf.String(), "no NATS server reachable yet") >= 2, buf.String()
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Connect to an unresolvable name: %v, want the context's end", err)
	}
}

// TestFailover: with a cluster's URLs, losing the connected server moves the
// connection to another one, and the move is logged.
func TestFailover(t *testing.T) {
	clusterPort := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	p0, p1 := clusterPort(), clusterPort()
	routes := server.RoutesFromStr(fmt.Sprintf("nats://127.0.0.1:%d,nats://127.0.0.1:%d", p0, p1))
	node := func(name string, port int) *server.Server {
		return runServer(t, func(o *server.Options) {
			o.ServerName = name
			o.Cluster = server.ClusterOpts{Name: "c", Host: "127.0.0.1", Port: port}
			o.Routes = routes
		})
	}
	s0, s1 := node("n0", p0), node("n1", p1)
	log, buf := testLogger(t)
	nc, err := connectCtx(t, Options{URLs: s0.ClientURL() + "," + s1.ClientURL(), ReconnectWait: 50 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	first := nc.ConnectedServerName()
	victim := s0
	if first == "n1" {
		victim = s1
	}
	victim.Shutdown()
	testwait.ForDetail(t, "connected to the other server", func() (bool, string) {
		name, up := nc.ConnectedServerName(), nc.IsConnected()
		return name != first && up, fmt.Sprintf("on %q, connected %v", name, up)
	})
	if err := nc.Publish("x", []byte("after failover")); err != nil {
		t.Fatal(err)
	}
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	logs := buf.String()
	for _, want := range []string{"NATS connection lost", "NATS reconnected"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}

func TestWaitJetStream(t *testing.T) {
	log, _ := testLogger(t)
	js := runServer(t, func(o *server.Options) { o.JetStream, o.StoreDir = true, t.TempDir() })
	nc, err := connectCtx(t, Options{URLs: js.ClientURL(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := WaitJetStream(ctx, nc, "", log); err != nil {
		t.Fatalf("WaitJetStream with JetStream: %v", err)
	}

	plain := runServer(t, nil)
	nc2, err := connectCtx(t, Options{URLs: plain.ClientURL(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel2()
	if err := WaitJetStream(ctx2, nc2, "", log); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitJetStream without JetStream: %v, want to wait until the deadline", err)
	}
}
