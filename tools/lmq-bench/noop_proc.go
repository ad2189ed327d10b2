package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

// The ceilings (noop-http, noop-rpc) run by default in a child process of
// the bench, as the gateway and beanstalkd run in processes of their own: a
// request that crosses to another process costs more wake-up latency than one
// between two goroutines of one process (at C=1, ~23 µs for an in-process
// noop-http round trip against ~86 µs for GET /healthz to the gateway), so a
// ceiling inside the bench would be optimistic and every ratio to it unfair
// to the gateway. --noop-in-process keeps them inside the bench.
//
// The child is the bench's own executable run with noopServeArg alone. It
// listens on loopback ports for both ceilings, writes one line with their
// addresses on stdout (noopAddrLine) and serves until its stdin closes: the
// bench holds the other end of that pipe, which closes however the bench
// ends (even killed), so the child cannot outlive it. The pull size of the
// coming cell reaches it through noopPullSizePath on its HTTP listener.

// noopServeArg is the hidden argument that makes the bench a ceilings child.
const noopServeArg = "--serve-noop"

// noopPullSizePath is the child's control endpoint: POST with ?n=SIZE sets
// the body size of pull answers of both ceilings.
const noopPullSizePath = "/_noop/pull-size"

// maybeServeNoop turns this process into the ceilings child when it was
// started as one, and exits; else it returns. main and TestMain call it.
func maybeServeNoop() {
	if len(os.Args) != 2 || os.Args[1] != noopServeArg {
		return
	}
	if err := serveNoop(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lmq-bench "+noopServeArg+":", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveNoop serves both ceilings until stdin ends, after writing their
// addresses on stdout.
func serveNoop(stdin io.Reader, stdout io.Writer) error {
	// The bench decides when the child ends (stdin); an interrupt typed at
	// the terminal goes to the whole process group, and the bench, still
	// writing its report, must not lose its ceilings under it.
	signal.Ignore(os.Interrupt)
	rs, err := newNoopRPCServer()
	if err != nil {
		return err
	}
	hs, err := newNoopServer(&rs.pullSize)
	if err != nil {
		_ = rs.close()
		return err
	}
	if _, err := fmt.Fprintf(stdout, "noop-http=%s noop-rpc=%s\n", hs.addr(), rs.addr()); err != nil {
		_ = hs.close()
		_ = rs.close()
		return err
	}
	_, _ = io.Copy(io.Discard, stdin) // until the bench closes it, or ends
	return errors.Join(hs.close(), rs.close())
}

// noopProc is the ceilings child as the bench sees it.
type noopProc struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stderr   bytes.Buffer // read only once exited is closed
	httpAddr string
	rpcAddr  string
	hc       *http.Client // control requests only
	exited   chan struct{}
	waitErr  error
}

// startNoopProc starts the ceilings child and waits for its addresses.
// procs, when positive, is its GOMAXPROCS (--server-procs).
func startNoopProc(ctx context.Context, procs int) (*noopProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("ceilings process: %w", err)
	}
	p := &noopProc{
		cmd:    exec.Command(exe, noopServeArg),
		hc:     &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second},
		exited: make(chan struct{}),
	}
	p.cmd.Env = serverEnv(procs)
	p.cmd.Stderr = &p.stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("ceilings process: %w", err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("ceilings process: %w", err)
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("ceilings process: %w", err)
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
	}()
	go func() {
		// Wait closes stdout, which ends the read above if it still waits.
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	fail := func(err error) (*noopProc, error) {
		p.stop()
		return nil, err
	}
	var s string
	select {
	case s = <-line:
	case <-ctx.Done():
		return fail(ctx.Err())
	case <-time.After(30 * time.Second):
		return fail(errors.New("ceilings process: no addresses within 30s"))
	}
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case tNoop:
			p.httpAddr = v
		case tNoopRPC:
			p.rpcAddr = v
		}
	}
	if p.httpAddr == "" || p.rpcAddr == "" {
		<-p.exited // no addresses: it ended (stdout closed) or wrote garbage
		return fail(fmt.Errorf("ceilings process: got %q: %v %s", strings.TrimSpace(s), p.waitErr, p.stderr.String()))
	}
	return p, nil
}

func (p *noopProc) pid() int {
	if p == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// setPullSize sets the body size of pull answers of both ceilings.
func (p *noopProc) setPullSize(ctx context.Context, n int) error {
	u := "http://" + p.httpAddr + noopPullSizePath + "?n=" + strconv.Itoa(n)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		if aerr := p.alive(); aerr != nil {
			return aerr
		}
		return err
	}
	b, _ := drain(resp.Body, nil)
	if resp.StatusCode != http.StatusNoContent {
		return &errStatus{op: "pull size", status: resp.StatusCode, body: snippet(b)}
	}
	return nil
}

// alive turns a dead child into an error (nil-safe).
func (p *noopProc) alive() error {
	if p == nil {
		return nil
	}
	select {
	case <-p.exited:
		return fmt.Errorf("ceilings process exited: %v %s", p.waitErr, strings.TrimSpace(p.stderr.String()))
	default:
		return nil
	}
}

// stop closes the child's stdin, which ends it, and kills it if it has not
// ended within 5 s (nil-safe).
func (p *noopProc) stop() {
	if p == nil {
		return
	}
	p.hc.CloseIdleConnections()
	_ = p.stdin.Close()
	select {
	case <-p.exited:
		return
	case <-time.After(5 * time.Second):
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}
