package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testpki"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// limHangGuard only keeps a broken test from hanging; nothing is expected
// to take that long.
const limHangGuard = 2 * time.Minute

// limRunToExit runs the binary with args and returns its output and exit
// error, for a start that must fail.
func limRunToExit(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limHangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, gatewayBinary, args...)
	cmd.Env = opsEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// limBaseArgs are the loopback ports and data directory of a gateway that is
// expected not to start.
func limBaseArgs(t *testing.T) []string {
	return []string{"--http-listen", anyPort, "--nats-listen", anyPort, "--data-dir", t.TempDir()}
}

// With HTTP authentication on, RPC (which has none) on a non-loopback
// address stops the start, with one line naming the flags to change.
func TestLimitsRPCExposedRefused(t *testing.T) {
	t.Parallel()
	const port = "0" // refused before anything is bound
	for name, args := range map[string][]string{
		"token, all IPv4": {"--auth-token", "secret", "--rpc-listen", "0.0.0.0:" + port},
		"basic, all":      {"--auth-basic", "u:p", "--rpc-listen", ":" + port},
	} {
		out, err := limRunToExit(t, append(limBaseArgs(t), args...)...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Fatalf("%s: exit %v, want a non-zero exit; output:\n%s", name, err, out)
		}
		for _, want := range []string{"exposes MessagePack-RPC", "--rpc-listen 127.0.0.1:18800", "--rpc-allow-unauthenticated", "--rpc-tls-client-ca"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", name, want, out)
			}
		}
		if n := strings.Count(strings.TrimSpace(out), "\n"); n != 0 {
			t.Errorf("%s: %d lines, want one:\n%s", name, n+1, out)
		}
	}
}

// With HTTP authentication and RPC on loopback the gateway starts, says so,
// and RPC works without credentials (for local users, as documented).
func TestLimitsRPCLoopbackWithAuth(t *testing.T) {
	t.Parallel()
	gw := newOpsGateway(t)
	gw.opsLaunch(nil, "--http-listen", strings.TrimPrefix(gw.HTTP, "http://"), "--auth-token", "secret", "--log-level", "info")
	if !testwait.Until(limHangGuard, func() bool { return strings.Contains(gw.Output(), "listens on loopback only") }) {
		t.Fatalf("no log line about RPC on loopback:\n%s", gw.Output())
	}
	if strings.Contains(gw.Output(), "MessagePack-RPC IS OPEN") {
		t.Errorf("warned about an open RPC port on loopback:\n%s", gw.Output())
	}
	c := dialRPC(t, gw.RPCAddr)
	c.MustOK("push", "lim-loop", "x")
	if m := c.MustPull("pull", "lim-loop", 5); m.Content != "x" {
		t.Fatalf("pulled %v", m.Content)
	}
}

// The explicit opt-in starts an exposed RPC port next to HTTP authentication,
// with a loud warning; without HTTP authentication the warning is there too.
func TestLimitsRPCOptInWarns(t *testing.T) {
	t.Parallel()
	for name, extra := range map[string][]string{
		"auth and opt-in": {"--auth-token", "secret", "--rpc-allow-unauthenticated"},
		"no auth":         nil,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			gw := newOpsGateway(t)
			port := gw.RPCAddr[strings.LastIndex(gw.RPCAddr, ":"):]
			args := append([]string{"--http-listen", strings.TrimPrefix(gw.HTTP, "http://"), "--rpc-listen", "0.0.0.0" + port, "--log-level", "warn"}, extra...)
			gw.opsLaunch(nil, args...)
			if !testwait.Until(limHangGuard, func() bool {
				out := gw.Output()
				return strings.Contains(out, "level=WARN") && strings.Contains(out, "MessagePack-RPC IS OPEN")
			}) {
				t.Fatalf("no warning about the open RPC port:\n%s", gw.Output())
			}
			c := dialRPC(t, loopbackOf(t, gw.RPCAddr))
			c.MustOK("push", "lim-open", "x")
		})
	}
}

// loopbackOf is the loopback address of a port bound on every interface.
func loopbackOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// limRawConn opens a TCP connection to the gateway's HTTP port.
func limRawConn(t *testing.T, gw *Gateway) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(gw.HTTP, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// limAwaitCut reads nc until the server closes it, and returns what it sent.
func limAwaitCut(t *testing.T, nc net.Conn) string {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(limHangGuard))
	b, err := io.ReadAll(nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v; read %q", limHangGuard, b)
	}
	return string(b)
}

// A body that stops arriving, or trickles, is cut: 408 and the connection
// closed; nothing is stored, and the gateway keeps serving.
func TestLimitsStalledBody(t *testing.T) {
	t.Parallel()
	gw, c := StartClient(t, "--read-body-idle-timeout", "1s", "--min-body-rate", "100")

	t.Run("stalled", func(t *testing.T) {
		nc := limRawConn(t, gw)
		fmt.Fprintf(nc, "POST /messages/lim-stall HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc")
		got := limAwaitCut(t, nc)
		if !strings.HasPrefix(got, "HTTP/1.1 408 ") {
			t.Errorf("answer %q, want 408", got)
		}
	})
	t.Run("trickle", func(t *testing.T) {
		// 5 bytes/s, under the floor of 100 bytes/s: cut once the grace
		// (1 s) is spent, although no single byte is late.
		nc := limRawConn(t, gw)
		fmt.Fprintf(nc, "POST /messages/lim-stall HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := nc.Write([]byte("x")); err != nil {
						return
					}
				}
			}
		}()
		got := limAwaitCut(t, nc)
		if !strings.HasPrefix(got, "HTTP/1.1 408 ") {
			t.Errorf("answer %q, want 408", got)
		}
	})
	c.PullEmpty("lim-stall", "0")
	c.Push("lim-after", []byte("fine"), "")
	c.MustPull("lim-after", "5", "fine")
}

// The body and write timeouts do not touch a pull waiting longer than both,
// nor an answer net/http writes on a connection idle longer than them.
func TestLimitsTimeoutsSpareLongPolls(t *testing.T) {
	t.Parallel()
	gw, c := StartClient(t, "--read-body-idle-timeout", "1s", "--write-timeout", "1s")
	// outlast lets n times the timeouts (1 s) pass: a timeout that fired
	// shows only in what comes after, no condition stands for it.
	outlast := func(n int) { time.Sleep(time.Duration(n) * time.Second) }

	// A pull waits three times the timeouts, then gets its message.
	pulled := make(chan *Response, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), limHangGuard)
		defer cancel()
		r, err := c.Send(ctx, http.MethodGet, "/messages/lim-long?t=600", nil)
		if err != nil {
			r = &Response{Status: -1, Body: []byte(err.Error())}
		}
		pulled <- r
	}()
	outlast(3)
	c.Push("lim-long", []byte("late"), "")
	ExpectMessage(t, <-pulled, "lim-long", "late")

	// One connection: an answer, an idle pause longer than the write
	// timeout, then a malformed request net/http itself answers (400): its
	// answer is written, not cut by the first answer's deadline.
	nc := limRawConn(t, gw)
	br := bufio.NewReader(nc)
	_ = nc.SetDeadline(time.Now().Add(limHangGuard))
	fmt.Fprintf(nc, "GET /properties HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	outlast(2)
	fmt.Fprintf(nc, "GET /properties HTTP/1.1\r\nHost: x\r\nnot a header line\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("malformed request after an idle pause: %v (want an answer, 400)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("malformed request: %d, want 400", resp.StatusCode)
	}
}

// limGet sends a request on nc and returns a channel with its status (-1
// when the connection fails first).
func limGet(nc net.Conn, path string) <-chan int {
	ch := make(chan int, 1)
	go func() {
		_ = nc.SetDeadline(time.Now().Add(limHangGuard))
		if _, err := fmt.Fprintf(nc, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
			ch <- -1
			return
		}
		resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if err != nil {
			ch <- -1
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ch <- resp.StatusCode
	}()
	return ch
}

// Beyond --max-http-conns, connections are not served until one closes; the
// gateway serves again afterwards.
func TestLimitsHTTPConns(t *testing.T) {
	t.Parallel()
	const max = 3
	gw := Start(t, "--max-http-conns", fmt.Sprint(max), "--max-waiting-pulls", "2")
	// The harness's own keep-alive connection would hold a slot.
	gw.hc.CloseIdleConnections()

	var held []net.Conn
	for i := range max {
		nc := limRawConn(t, gw)
		if st := <-limGet(nc, "/healthz"); st != http.StatusOK {
			t.Fatalf("connection %d: status %d", i, st)
		}
		held = append(held, nc) // kept alive, holding its slot
	}
	extra1, extra2 := limRawConn(t, gw), limRawConn(t, gw)
	ans1, ans2 := limGet(extra1, "/healthz"), limGet(extra2, "/healthz")
	select {
	case st := <-ans1:
		t.Fatalf("a connection beyond the limit was served: %d", st)
	case st := <-ans2:
		t.Fatalf("a connection beyond the limit was served: %d", st)
	case <-time.After(500 * time.Millisecond):
	}
	// Each closed connection lets one waiting in.
	held[0].Close()
	var got []int
	select {
	case st := <-ans1:
		got = append(got, st)
		held[1].Close()
		got = append(got, <-ans2)
	case st := <-ans2:
		got = append(got, st)
		held[1].Close()
		got = append(got, <-ans1)
	}
	if got[0] != http.StatusOK || got[1] != http.StatusOK {
		t.Fatalf("after closing: statuses %v", got)
	}
	for _, nc := range []net.Conn{held[2], extra1, extra2} {
		nc.Close()
	}
	c := gw.Client(t)
	c.Push("lim-conns", []byte("m"), "")
	c.MustPull("lim-conns", "5", "m")
}

// limDialRPCTLS connects to a TLS RPC port; cert may be nil.
func limDialRPCTLS(t *testing.T, addr string, pki map[string]string, cert *tls.Certificate) (*rpcClient, error) {
	t.Helper()
	pem, err := os.ReadFile(pki["ca.pem"])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	nc, err := rpcDial(addr)
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(nc, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), limHangGuard)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	c := &rpcConn{nc: tc, pending: make(map[uint32]chan rpcResponse), done: make(chan struct{})}
	go c.readLoop()
	t.Cleanup(c.Close)
	return &rpcClient{t: t, rpcConn: c}, nil
}

// RPC over TLS: a round trip; a plain client gets nothing. With a client CA,
// RPC is authenticated: an exposed port starts next to HTTP authentication
// without the opt-in, and a client without a certificate is refused.
func TestLimitsRPCTLS(t *testing.T) {
	t.Parallel()
	pki := testpki.Write(t, t.TempDir())

	t.Run("server cert", func(t *testing.T) {
		t.Parallel()
		gw := Start(t, "--rpc-tls-cert", pki["server.pem"], "--rpc-tls-key", pki["server-key.pem"])
		c, err := limDialRPCTLS(t, gw.RPCAddr, pki, nil)
		if err != nil {
			t.Fatalf("TLS handshake: %v", err)
		}
		c.MustOK("push", "lim-tls", "secret")
		m := c.MustPull("pull", "lim-tls", 5)
		if m.Content != "secret" {
			t.Fatalf("pulled %v", m.Content)
		}
		c.MustOK("done", "lim-tls", m.ID)

		// A plaintext request is not answered: the connection ends.
		plain := dialRPC(t, gw.RPCAddr)
		ctx, cancel := context.WithTimeout(context.Background(), limHangGuard)
		defer cancel()
		if r, err := plain.Call(ctx, "push", "lim-tls", "plain"); err == nil {
			t.Fatalf("plaintext push over the TLS port answered: %+v", r)
		}
		c.MustEmpty("pull", "lim-tls", 0)
	})

	t.Run("client certs", func(t *testing.T) {
		t.Parallel()
		gw := newOpsGateway(t)
		port := gw.RPCAddr[strings.LastIndex(gw.RPCAddr, ":"):]
		gw.opsLaunch(nil, "--http-listen", strings.TrimPrefix(gw.HTTP, "http://"), "--auth-token", "secret",
			"--rpc-listen", "0.0.0.0"+port, "--log-level", "info",
			"--rpc-tls-cert", pki["server.pem"], "--rpc-tls-key", pki["server-key.pem"], "--rpc-tls-client-ca", pki["ca.pem"])
		addr := loopbackOf(t, gw.RPCAddr)
		cert, err := tls.LoadX509KeyPair(pki["client.pem"], pki["client-key.pem"])
		if err != nil {
			t.Fatal(err)
		}
		c, err := limDialRPCTLS(t, addr, pki, &cert)
		if err != nil {
			t.Fatalf("TLS handshake with a client certificate: %v", err)
		}
		c.MustOK("push", "lim-mtls", "m")
		if m := c.MustPull("pull", "lim-mtls", 5); m.Content != "m" {
			t.Fatalf("pulled %v", m.Content)
		}
		// Without a certificate: refused (in TLS 1.3 the refusal arrives
		// with the first read after the handshake).
		anon, err := limDialRPCTLS(t, addr, pki, nil)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), limHangGuard)
			defer cancel()
			if r, err := anon.Call(ctx, "push", "lim-mtls", "anon"); err == nil {
				t.Fatalf("push without a client certificate answered: %+v", r)
			}
		}
		if out := gw.Output(); strings.Contains(out, "MessagePack-RPC IS OPEN") || !strings.Contains(out, "requires client certificates") {
			t.Errorf("log about RPC with client certificates:\n%s", out)
		}
		c.MustEmpty("pull", "lim-mtls", 0)
	})
}
