package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// testConfig is a server on loopback ports the kernel picks, with an
// in-process embedded NATS server in a fresh directory.
func testConfig(t *testing.T, dir string) Config {
	t.Helper()
	return Config{
		HTTPListen: "127.0.0.1:0",
		RPCListen:  "127.0.0.1:0",
		MaxBody:    1 << 20,
		Embedded:   embedded.Options{DataDir: dir},
		Replicas:   1,
		Version:    "test",
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeShutdown runs a server on ports it picked, and shuts it down with
// a long-poll waiting: the long-poll answers 204, Serve returns nil, the
// listeners refuse connections, the data directory is free again, and a
// second Shutdown returns the first's result.
func TestServeShutdown(t *testing.T) {
	dir := t.TempDir()
	s, err := New(t.Context(), testConfig(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.HTTPAddr().String()
	if s.RPCAddr() == nil || strings.HasSuffix(s.RPCAddr().String(), ":0") {
		t.Fatalf("RPC address %v: want the port picked", s.RPCAddr())
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(context.Background()) }()

	if code, _ := get(t, base+"/properties"); code != http.StatusOK {
		t.Fatalf("GET /properties: %d", code)
	}
	polled := make(chan int, 1)
	go func() {
		code, _ := get(t, base+"/messages/server-test?t=60")
		polled <- code
	}()
	testwait.For(t, "the long-poll waits", func() bool {
		_, body := get(t, base+"/metrics")
		return strings.Contains(body, "long_polls_waiting 1")
	})

	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if code := <-polled; code != http.StatusNoContent {
		t.Errorf("long-poll at shutdown: %d, want 204", code)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v, want nil after Shutdown", err)
	}
	for _, a := range []net.Addr{s.HTTPAddr(), s.RPCAddr()} {
		if c, err := net.Dial("tcp", a.String()); err == nil {
			c.Close()
			t.Errorf("%v still accepts connections after Shutdown", a)
		}
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	// The embedded server stopped and released its directory.
	reopen(t, dir, "after Shutdown")
}

// reopen asserts that a server starts on dir, where one stopped (after),
// and shuts down without having served.
func reopen(t *testing.T, dir, after string) {
	t.Helper()
	s, err := New(t.Context(), testConfig(t, dir))
	if err != nil {
		t.Fatalf("New on the same directory %s: %v", after, err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown without Serve: %v", err)
	}
}

// TestNewFailsOnTakenPort: a port in use fails New, and what New had started
// is stopped (the data directory can be used again).
func TestNewFailsOnTakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.RPCListen = l.Addr().String()
	if _, err := New(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "--rpc-listen") {
		t.Fatalf("New with the RPC port taken: %v, want an error naming --rpc-listen", err)
	}
	reopen(t, dir, "after a failed New")
}

// TestDebugListener: with Config.DebugListen the pprof index answers on its
// own listener, not on the API's; without it nothing is bound, and the API
// does not serve pprof either. Shutdown closes the debug listener.
func TestDebugListener(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.DebugListen = "127.0.0.1:0"
	s, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(context.Background()) }()
	if s.DebugAddr() == nil {
		t.Fatal("DebugAddr is nil with DebugListen set")
	}
	dbg := "http://" + s.DebugAddr().String()
	if code, body := get(t, dbg+"/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("GET /debug/pprof/ on the debug listener: %d %.80q, want 200 with the profile index", code, body)
	}
	if code, _ := get(t, "http://"+s.HTTPAddr().String()+"/debug/pprof/"); code == http.StatusOK {
		t.Errorf("GET /debug/pprof/ on the API listener: 200, want it not served there")
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	<-served
	if c, err := net.Dial("tcp", s.DebugAddr().String()); err == nil {
		c.Close()
		t.Errorf("debug listener still accepts connections after Shutdown")
	}

	// Off by default.
	s2, err := New(t.Context(), testConfig(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if a := s2.DebugAddr(); a != nil {
		t.Errorf("DebugAddr %v without DebugListen, want nil", a)
	}
	if err := s2.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
