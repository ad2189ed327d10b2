// Command lmq-bench measures lmq-gateway against the engine underneath it,
// against the HTTP and MessagePack-RPC ceilings and against beanstalkd, in
// one run, and prints markdown tables.
//
// Seven targets are driven by the same workload code:
//
//   - http: the gateway's HTTP API (POST /messages/NAME to push; GET
//     /messages/NAME?t=... to pull, then POST /messages/NAME/ID?reply=ack).
//   - rpc: the gateway's MessagePack-RPC API, one TCP connection per client,
//     requests pipelined on it (push, pull, done).
//   - sqs: the gateway's Amazon SQS API (--sqs-listen), AWS JSON 1.0 written
//     by hand and unsigned (SendMessage; ReceiveMessage then DeleteMessage);
//     skipped when the gateway serves none.
//   - jetstream: raw nats.go JetStream on the same NATS server (one WorkQueue
//     stream and durable pull consumer per queue; sync Publish; Fetch(1) +
//     DoubleAck), so that every gateway figure has its ratio to the engine.
//   - noop-http: a no-op net/http handler driven by the HTTP client code of
//     the http target: the HTTP ceiling.
//   - noop-rpc: a no-op MessagePack-RPC server driven by the client code of
//     the rpc target (same framing, same pipelining): the RPC ceiling.
//     Both ceilings run in a child process of the bench (its own executable
//     re-run), as the gateway runs in its own: crossing processes costs
//     wake-up latency that goroutines of one process do not pay.
//     --noop-in-process runs them inside the bench instead.
//   - beanstalkd: a beanstalkd the bench starts from PATH (binlog on, in a
//     temporary directory), spoken to in its text protocol by hand (put;
//     reserve-with-timeout then delete); skipped when there is none.
//
// Workloads: push-only; pull+ack draining the queues the push left behind;
// push and pull+ack at once; end-to-end latency at a fixed offered rate (open
// loop); a search for the highest offered rate with p99 within a bound; and
// the gateway's memory with a large backlog. By default the tool builds and
// starts its own gateway (--spawn) on free loopback ports and a temporary data
// directory, and uses that gateway's embedded NATS for the jetstream target.
//
// Run `go run ./tools/lmq-bench --help` for the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	maybeServeNoop() // the ceilings child (noop_proc.go) never returns
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lmq-bench:", err)
		os.Exit(1)
	}
}

// run is main without the process: it parses args, runs the benchmark and
// writes the report to stdout. Tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	b, err := newBench(cfg, stderr)
	if err != nil {
		return err
	}
	return b.run(ctx, stdout)
}
