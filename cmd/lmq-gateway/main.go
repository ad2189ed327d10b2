// Command lmq-gateway serves the LMQ message-queue API (HTTP and
// MessagePack-RPC) on NATS JetStream, with an embedded nats-server by default
// or in front of an existing NATS deployment (--nats-url).
//
// Subcommands: serve (the default), status (print the nodes and queues of a
// running gateway, like LMQ's lmq-admin status), token (create, list and
// revoke the access tokens of a gateway run with --tokens), version, migrate (copy a
// running LMQ into the gateway) and names (a queue's JetStream names). Run
// "lmq-gateway --help" for the settings, their defaults, environment
// variables and config file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/nats-io/nats-server/v2/server"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3".
// Without it the module version of the build (or "devel") is reported.
var version = ""

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	default:
		fmt.Fprintln(os.Stderr, "lmq-gateway:", err)
		os.Exit(1)
	}
}

// run dispatches to a subcommand; without one it serves.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, stderr)
	case "status":
		return status(ctx, args, stdout, stderr)
	case "token":
		return token(ctx, args, stdout, stderr)
	case "version":
		_, err := fmt.Fprintln(stdout, versionLine())
		return err
	case "migrate":
		// Ctrl-C lets the migration finish the message in hand.
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		return migrateMain(ctx, args, stdout)
	case "names":
		return namesMain(args, stdout)
	case "help":
		fs := newFlagSet(&config{}, stdout)
		usage(fs, stdout)
		return nil
	}
	return fmt.Errorf("unknown command %q (want serve, status, token, version, migrate or names; see --help)", cmd)
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

func versionLine() string {
	return fmt.Sprintf("lmq-gateway %s (%s, nats-server %s)", versionString(), runtime.Version(), server.VERSION)
}

func newLogger(c *config, out io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	ho := &slog.HandlerOptions{Level: level}
	switch c.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(out, ho)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(out, ho)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", c.logFormat)
}
