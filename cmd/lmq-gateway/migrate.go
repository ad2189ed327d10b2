package main

// The migrate command's flags: the command line of package migrate, which
// is a library (Options, Run) and parses no flags itself.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/flaghelp"
	"github.com/lmq-gateway/lmq-gateway/migrate"
	"github.com/lmq-gateway/lmq-gateway/natsconn"
)

// regexpFlag is a flag.Value holding an optional regexp.
type regexpFlag struct{ re **regexp.Regexp }

func (f regexpFlag) String() string {
	if f.re == nil || *f.re == nil {
		return ""
	}
	return (*f.re).String()
}

func (f regexpFlag) Set(s string) error {
	re, err := regexp.Compile(s)
	if err != nil {
		return err
	}
	*f.re = re
	return nil
}

// migrateFlags defines the migrate command's flags on fs and returns the
// Options they fill.
func migrateFlags(fs *flag.FlagSet) *migrate.Options {
	o := &migrate.Options{}
	fs.StringVar(&o.From, "from", "", "base URL of the old LMQ's HTTP API, e.g. http://old-lmq:9980 (required)")
	fs.StringVar(&o.ToNATS, "to-nats", "nats://127.0.0.1:4222", "NATS of the target gateway: its embedded server's URL with credentials, \"$(cat DATA-DIR/nats-client.url)\", or the --nats-url it uses")
	// The gateway's --nats-* connection flags, as --to-nats-*.
	natsconn.AddFlags(fs, &o.ToNATSAuth, "to-nats-", "to-nats")
	fs.StringVar(&o.ToNATSAuth.Domain, "to-nats-domain", "", "JetStream `DOMAIN` the target gateway keeps its queues in (its --nats-domain); empty: the account's own JetStream")
	fs.Var(regexpFlag{&o.Queues}, "queues", "copy only queues whose name matches this regexp (unanchored; default: all)")
	fs.BoolVar(&o.DryRun, "dry-run", false, "list what would be copied, change nothing")
	fs.IntVar(&o.Parallel, "parallel", 4, "queues copied at once (messages of one queue are copied in order)")
	fs.DurationVar(&o.Linger, "linger", 10*time.Second, "how long to wait for messages the source still has in flight or in an open accumulation window")
	fs.DurationVar(&o.RetryFor, "retry-for", time.Minute, "how long to retry an unreachable source or target before giving up")
	fs.DurationVar(&o.MinSourceTimeout, "min-source-timeout", 10*time.Second, "raise shorter queue timeouts on the source to this while copying (restored afterwards); negative: never change the source")
	fs.IntVar(&o.Replicas, "replicas", 1, "replicas of streams created on the target, 1 to 5 (as the gateway's --replicas)")
	fs.DurationVar(&o.Progress, "progress", 2*time.Second, "interval of per-queue progress lines (negative: none)")
	return o
}

// migrateMain is the `lmq-gateway migrate` command: it parses args, migrates, and
// writes progress, warnings and the summary to out. Cancel ctx (SIGINT) to
// stop after the message in hand; run it again to finish.
func migrateMain(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("lmq-gateway migrate", flag.ContinueOnError)
	fs.SetOutput(out)
	o := migrateFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(out, `Usage: lmq-gateway migrate --from http://old-lmq:9980 [--to-nats "$(cat DATA-DIR/nats-client.url)"] [--queues REGEXP] [--dry-run]

Copies a running LMQ into the gateway's JetStream: the default-properties list,
every queue's properties, and every waiting message (acked on LMQ only once
stored). Safe to interrupt at any point and to run again.

`)
		flaghelp.PrintDefaults(fs, out)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := checkMigrateFlags(o); err != nil {
		return err
	}
	o.Logger = slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return migrate.Run(ctx, *o, out)
}

// checkMigrateFlags rejects settings that the library would quietly default
// (Options.Replicas 0 means 1 there; on the command line it is a mistake).
func checkMigrateFlags(o *migrate.Options) error {
	if o.Replicas < 1 || o.Replicas > 5 {
		return fmt.Errorf("--replicas %d: want 1 to 5 (JetStream's limit; as the gateway's --replicas)", o.Replicas)
	}
	return nil
}
