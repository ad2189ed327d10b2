package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// startTestBeanstalkd starts beanstalkd from PATH for a test, or skips the
// test when there is none (TestBeanstalkdSkipped covers that case).
func startTestBeanstalkd(t *testing.T, maxJob int) *beanstalkdProc {
	t.Helper()
	bin, err := lookBeanstalkd(os.Getenv("PATH"))
	if err != nil {
		t.Skipf("%v: the target's skip is covered by TestBeanstalkdSkipped", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := startBeanstalkd(ctx, bin, maxJob, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.stop()
		if _, err := os.Stat(p.dir); !os.IsNotExist(err) {
			t.Errorf("beanstalkd dir %s not removed: %v", p.dir, err)
		}
	})
	return p
}

// TestBeanstalkd pushes bodies of several sizes (one over beanstalkd's
// default maximum job size) into tubes named by queue names valid and not,
// pulls every one back intact, then runs a push cell and a pull cell that
// drains what it left: every message pushed comes back.
func TestBeanstalkd(t *testing.T) {
	const big = 70_000
	p := startTestBeanstalkd(t, big)
	if !strings.Contains(strings.Join(p.args, " "), "-z 70000") {
		t.Errorf("args %q lack -z 70000", p.args)
	}
	bt := newBeanstalkdTarget(p)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	queues := []string{"plain-queue", "-odd name/é$", strings.Repeat("long", 60)}
	for _, q := range queues {
		if err := bt.setup(ctx, q); err != nil {
			t.Fatalf("setup %q: %v", q, err)
		}
	}
	c, err := bt.newClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	sizes := []int{16, 256, 65536, big}
	body := func(q, i int) []byte {
		b := bytes.Repeat([]byte{byte('a' + q)}, sizes[i%len(sizes)])
		copy(b, fmt.Sprintf("%d/%d\r\n", q, i)) // a CRLF inside must not matter
		return b
	}
	const perQueue = 8
	for i := range perQueue {
		for q, name := range queues {
			if err := c.push(ctx, name, body(q, i)); err != nil {
				t.Fatalf("push %d to %q: %v", i, name, err)
			}
		}
	}
	for q, name := range queues {
		for i := range perQueue {
			got, ack, err := c.pull(ctx, name, time.Second)
			if err != nil || ack == nil {
				t.Fatalf("pull %d from %q: ack %v, %v", i, name, ack != nil, err)
			}
			if want := body(q, i); !bytes.Equal(got, want) {
				t.Fatalf("pull %d from %q: %d bytes %q…, want %d bytes %q…", i, name, len(got), snippet(got[:min(len(got), 12)]), len(want), want[:12])
			}
			if err := ack(ctx); err != nil {
				t.Fatalf("ack %d from %q: %v", i, name, err)
			}
		}
		if _, ack, err := c.pull(ctx, name, 0); err != nil || ack != nil {
			t.Fatalf("%q not empty after the pulls: ack %v, %v", name, ack != nil, err)
		}
	}
	// Waits under a second are polled; the message is found all the same.
	if _, ack, err := c.pull(ctx, queues[0], 30*time.Millisecond); err != nil || ack != nil {
		t.Fatalf("polled pull of an empty queue: ack %v, %v", ack != nil, err)
	}
	if err := c.push(ctx, queues[0], body(0, 1)); err != nil {
		t.Fatal(err)
	}
	if got, ack, err := c.pull(ctx, queues[0], 500*time.Millisecond); err != nil || ack == nil || !bytes.Equal(got, body(0, 1)) {
		t.Fatalf("polled pull: ack %v, %v", ack != nil, err)
	} else if err := ack(ctx); err != nil {
		t.Fatal(err)
	}

	// remove deletes what waits.
	for range 3 {
		if err := c.push(ctx, queues[0], body(0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := bt.remove(ctx, queues[0]); err != nil {
		t.Fatal(err)
	}
	if _, ack, err := c.pull(ctx, queues[0], 0); err != nil || ack != nil {
		t.Fatalf("queue not empty after remove: ack %v, %v", ack != nil, err)
	}

	// The bench's cells: push for a moment, then pull until the queues
	// are empty (the pull cell ends early when they are; its duration
	// is only a bound).
	cfg, err := parseFlags([]string{"--duration", "150ms", "--setup-conc", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newBench(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b.beanstalkd = p
	qs, err := b.createQueues(ctx, bt, "t", 3)
	if err != nil {
		t.Fatal(err)
	}
	push, err := b.pushCell(ctx, bt, qs, 2, 256)
	if err != nil {
		t.Fatal(err)
	}
	b.cfg.duration = 50 * time.Second
	pull, err := b.pullCell(ctx, bt, qs, 2, 256)
	if err != nil {
		t.Fatal(err)
	}
	if push.msgs == 0 || push.errors > 0 {
		t.Errorf("push cell: %d msgs, %d errors (%s)", push.msgs, push.errors, push.firstErr)
	}
	if pull.msgs != push.msgs || pull.missing > 0 || pull.errors > 0 || qs.total() != 0 {
		t.Errorf("pull cell: %d of %d pushed msgs back, %d missing, %d errors (%s), %d left", pull.msgs, push.msgs, pull.missing, pull.errors, pull.firstErr, qs.total())
	}
	if push.srvCPU < 0 || b.targetRSS(bt) <= 0 {
		t.Errorf("beanstalkd figures: cpu %v, rss %d", push.srvCPU, b.targetRSS(bt))
	}
}

// TestBeanstalkdSkipped runs with a PATH that has no beanstalkd: the target
// is skipped with a note and the run goes on with the others (noop-rpc).
func TestBeanstalkdSkipped(t *testing.T) {
	cfg, err := parseFlags([]string{
		"--targets", "beanstalkd,noop-rpc", "--workloads", "push,pull",
		"--conc", "2", "--sizes", "256", "--queues", "2", "--duration", "50ms", "--rpc-depth", "2",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newBench(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b.pathEnv = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := b.run(ctx, &out); err != nil {
		t.Fatal(err)
	}
	report := out.String()
	for _, want := range []string{
		"**target beanstalkd skipped: beanstalkd not found in PATH**",
		"| noop-rpc | 2 | 256 B | — |", "depth 2", "- deployment: no gateway",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(report, "| beanstalkd |") || b.beanstalkd != nil {
		t.Error("beanstalkd ran though not in PATH")
	}
	if len(b.cells) != 2 {
		t.Errorf("%d cells, want 2 (noop-rpc push and pull)", len(b.cells))
	}
	for _, c := range b.cells {
		if c.msgs <= 0 || c.errors > 0 {
			t.Errorf("cell %s %s: %d msgs, %d errors (%s)", c.workload, c.target, c.msgs, c.errors, c.firstErr)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", report)
	}
}

func TestLookBeanstalkd(t *testing.T) {
	dir := t.TempDir()
	if _, err := lookBeanstalkd(dir + string(os.PathListSeparator) + "relative"); err == nil {
		t.Error("found beanstalkd in an empty dir")
	}
	bin := dir + "/beanstalkd"
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := lookBeanstalkd(dir); err == nil {
		t.Error("found a beanstalkd that is not executable")
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := lookBeanstalkd("" + string(os.PathListSeparator) + dir); err != nil || got != bin {
		t.Errorf("lookBeanstalkd = %q, %v; want %q", got, err, bin)
	}
}

func TestBSWait(t *testing.T) {
	for _, tc := range []struct {
		wait time.Duration
		secs int64
		poll bool
	}{
		{0, 0, false}, {-time.Second, 0, false}, {50 * time.Millisecond, 0, true},
		{999 * time.Millisecond, 0, true}, {time.Second, 1, false}, {2500 * time.Millisecond, 2, false},
	} {
		if secs, poll := bsWait(tc.wait); secs != tc.secs || poll != tc.poll {
			t.Errorf("bsWait(%v) = %d, %v; want %d, %v", tc.wait, secs, poll, tc.secs, tc.poll)
		}
	}
}

func TestTubeName(t *testing.T) {
	for _, q := range []string{"lmqb-a1b2c3-beanstalkd-q100-7", "a+b/c;d.ef_g(h)-"} {
		if got := tubeName(q); got != q {
			t.Errorf("tubeName(%q) = %q, want it unchanged", q, got)
		}
	}
	seen := map[string]string{}
	for _, q := range []string{
		"-lead", "$2dlead", "a b", "a$20b", "a$b", "é", "a\r\nb", "", "$$", strings.Repeat("x", 201),
		strings.Repeat("x", 200) + "y", strings.Repeat("é", 150), strings.Repeat("é", 150) + "z",
	} {
		got := tubeName(q)
		if !validTube(got) {
			t.Errorf("tubeName(%q) = %q: not a valid tube name", q, got)
		}
		if prev, ok := seen[got]; ok {
			t.Errorf("tubeName(%q) = tubeName(%q) = %q", q, prev, got)
		}
		seen[got] = q
	}
}

// fakeBeanstalkd answers every connection with answer after reading the
// client's first command, then holds the connection until the test ends.
func fakeBeanstalkd(t *testing.T, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
					return
				}
				_, _ = io.WriteString(conn, answer)
				_, _ = io.Copy(io.Discard, conn)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestBeanstalkdReaderBounds: a job length over the bound, a line without
// CRLF or an answer the client cannot place end the connection with an
// error, and nothing is allocated for the declared length.
func TestBeanstalkdReaderBounds(t *testing.T) {
	for _, tc := range []struct{ answer, want string }{
		{"WATCHING 2\r\nWATCHING 1\r\nRESERVED 1 99999999999\r\n", "over the bound"},
		{"WATCHING 2\r\nWATCHING 1\r\nRESERVED 1 5\r\nabcdeXY", "not followed by CRLF"},
		{"WATCHING 2\r\nWATCHING 1\r\nRESERVED 1\r\n", "malformed answer"},
		{"WATCHING 2\n", "does not end in CRLF"},
		{"NOT_IGNORED\r\n", "answer \"NOT_IGNORED\""},
		{"WATCHING 2\r\nWATCHING 1\r\n" + strings.Repeat("x", 70<<10), "over 64 KiB"},
	} {
		addr := fakeBeanstalkd(t, tc.answer)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := dialBeanstalkd(ctx, addr, bsReadBound)
		if err != nil {
			t.Fatal(err)
		}
		_, ack, err := c.pull(ctx, "q", 0)
		if err == nil || ack != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("answer %q: ack %v, err %v; want an error with %q", snippet([]byte(tc.answer)), ack != nil, err, tc.want)
		}
		if c.body.Cap() > 1<<10 {
			t.Errorf("answer %q: body buffer of %d bytes", snippet([]byte(tc.answer)), c.body.Cap())
		}
		if err2 := c.push(ctx, "q", []byte("x")); err2 == nil || !strings.Contains(err2.Error(), "connection closed") {
			t.Errorf("answer %q: push after the failure: %v, want the connection closed", snippet([]byte(tc.answer)), err2)
		}
		c.close()
		cancel()
	}
}
