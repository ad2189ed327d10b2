package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// TestNoopRPC drives the RPC ceiling with the rpc target's client code,
// requests pipelined on one connection: push and done answer "ok", a pull
// answers a message of the size set, an unknown method an error.
func TestNoopRPC(t *testing.T) {
	nt, err := newNoopRPCTarget(4)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := nt.close(); err != nil {
			t.Error(err)
		}
	}()
	if nt.name() != tNoopRPC || nt.stateful() || nt.depth() != 4 {
		t.Errorf("noop-rpc target: name %q, stateful %v, depth %d", nt.name(), nt.stateful(), nt.depth())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := nt.newClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.close()
	for _, size := range []int{16, 300, 70_000} {
		if err := nt.setSize(ctx, size); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 { // four requests in flight on the connection
			wg.Go(func() {
				for range 20 {
					if err := cl.push(ctx, "q", make([]byte, 1000)); err != nil {
						t.Error(err)
						return
					}
					body, ack, err := cl.pull(ctx, "q", time.Second)
					if err != nil || ack == nil || len(body) != size {
						t.Errorf("pull: %d bytes, ack %v, %v; want %d bytes", len(body), ack != nil, err, size)
						return
					}
					if err := ack(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	rc := cl.(*rpcConn)
	_, err = rc.call(ctx, "purge_everything", func(e *msgpack.Encoder) error { return e.EncodeArrayLen(0) })
	if err == nil || !strings.Contains(err.Error(), "undef") {
		t.Errorf("unknown method: %v, want an undef error", err)
	}
}

// TestReportRatios checks the ratio columns on made-up cells: rpc against
// noop-rpc and the sum of parts with jetstream, http and rpc against
// beanstalkd of the same cell.
func TestReportRatios(t *testing.T) {
	b := &bench{}
	cell := func(target string, queues int, rate float64) cellResult {
		return cellResult{workload: wPush, target: target, conc: 16, size: 256, queues: queues, rate: rate, msgs: 1}
	}
	// As in a run: the ceilings have cells of the first queue count only.
	b.cells = []cellResult{
		cell(tJS, 1, 1000), cell(tBeanstalkd, 1, 2000),
		cell(tNoop, 1, 3000), cell(tHTTP, 1, 400),
		cell(tNoopRPC, 1, 5000), cell(tRPC, 1, 500),
		cell(tJS, 10, 1000), cell(tRPC, 10, 250),
	}
	report := b.report()
	for _, want := range []string{
		// rpc: 500/5000; parts 1/(1/5000+1/1000) = 833: 500/833; 500/2000.
		"| rpc | 16 | 256 B | 1 | 500 | — | — | — | — | — | 0.50× | — | 0.10× | 0.60× | 0.25× |",
		// http: 400/3000; parts 1/(1/3000+1/1000) = 750: 400/750; 400/2000.
		"| http | 16 | 256 B | 1 | 400 | — | — | — | — | — | 0.40× | 0.13× | — | 0.53× | 0.20× |",
		"| beanstalkd | 16 | 256 B | 1 | 2,000 | — | — | — | — | — | 2.00× | — | — | — | — |",
		"| noop-rpc | 16 | 256 B | — | 5,000 |",
		// 10 queues: the ceiling of one queue count, no beanstalkd cell.
		"| rpc | 16 | 256 B | 10 | 250 | — | — | — | — | — | 0.25× | — | 0.05× | 0.30× | — |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The baselines come before the rows that compare with them.
	order := []string{"| jetstream |", "| beanstalkd |", "| noop-http |", "| http |", "| noop-rpc |", "| rpc |"}
	last := -1
	for _, o := range order {
		i := strings.Index(report, o)
		if i < last {
			t.Errorf("%q out of order", o)
		}
		last = i
	}
	if t.Failed() {
		t.Logf("report:\n%s", report)
	}
}
