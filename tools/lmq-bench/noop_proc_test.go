package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary be the ceilings child: the bench re-runs its
// own executable, which under go test is this binary.
func TestMain(m *testing.M) {
	maybeServeNoop()
	os.Exit(m.Run())
}

// TestNoopProc drives both ceilings in the child process: the pull size set
// through the control endpoint reaches both, and the child ends cleanly
// (not killed) when its stdin closes.
func TestNoopProc(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := startNoopProc(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	if p.pid() <= 0 || p.pid() == os.Getpid() {
		t.Errorf("child pid %d (bench %d)", p.pid(), os.Getpid())
	}
	ht := newChildNoopHTTPTarget(p, 2)
	rt := newChildNoopRPCTarget(p, 2)
	for _, tg := range []target{ht, rt} {
		if tg.stateful() {
			t.Errorf("%s: stateful", tg.name())
		}
	}
	for _, size := range []int{16, 70_000} {
		for _, tg := range []target{ht, rt} {
			if err := tg.(sizer).setSize(ctx, size); err != nil {
				t.Fatal(err)
			}
			cl, err := tg.newClient(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.push(ctx, "q", make([]byte, 1000)); err != nil {
				t.Errorf("%s push: %v", tg.name(), err)
			}
			body, ack, err := cl.pull(ctx, "q", time.Second)
			if err != nil || ack == nil || len(body) != size {
				t.Errorf("%s pull: %d bytes, ack %v, %v; want %d bytes", tg.name(), len(body), ack != nil, err, size)
			} else if err := ack(ctx); err != nil {
				t.Errorf("%s ack: %v", tg.name(), err)
			}
			cl.close()
		}
	}
	b := &bench{noop: p}
	if b.ceilingPID(ht) != p.pid() || b.ceilingPID(rt) != p.pid() || b.targetRSS(rt) <= 0 {
		t.Errorf("srv figures of the child: pid %d/%d, rss %d", b.ceilingPID(ht), b.ceilingPID(rt), b.targetRSS(rt))
	}
	if err := p.alive(); err != nil {
		t.Fatal(err)
	}
	ht.close()
	rt.close()
	p.stop()
	if p.alive() == nil {
		t.Fatal("child alive after stop")
	}
	if p.waitErr != nil {
		t.Errorf("child ended with %v (killed?); stderr: %s", p.waitErr, p.stderr.String())
	}
}

// TestNoopInProcess runs the ceilings inside the bench (--noop-in-process)
// and checks that the report says where they ran.
func TestNoopInProcess(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{
		"--targets", "noop-http,noop-rpc", "--workloads", "push,pull",
		"--conc", "2", "--sizes", "256", "--queues", "1", "--duration", "200ms",
		"--noop-in-process",
	}, &out, &errOut)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	rep := out.String()
	for _, want := range []string{"| noop-http | 2 | 256 B | — |", "| noop-rpc | 2 | 256 B | — |", "- ceilings: inside the bench (--noop-in-process)"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
}
