// Command lmq-gateway serves the LMQ message-queue API (HTTP and
// MessagePack-RPC) on NATS JetStream, with an embedded nats-server by default
// or in front of an existing NATS deployment (--nats-url).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/httpapi"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "lmq-gateway:", err)
		os.Exit(1)
	}
}

// config is every setting of the binary.
type config struct {
	httpListen    string
	rpcListen     string
	dataDir       string
	natsURL       string
	natsListen    string
	replicas      int
	maxBody       int64
	maxPayload    int
	syncAlways    bool
	serverName    string
	clusterName   string
	clusterListen string
	routes        string
	logLevel      string
	logFormat     string
}

// parseFlags reads flags, each of which may also be set by an LMQ_*
// environment variable (--http-listen ↔ LMQ_HTTP_LISTEN); flags win.
func parseFlags(args []string, out io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("lmq-gateway", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.httpListen, "http-listen", ":9980", "HTTP API address")
	fs.StringVar(&c.rpcListen, "rpc-listen", ":18800", "MessagePack-RPC address (empty: off)")
	fs.StringVar(&c.dataDir, "data-dir", "./data", "JetStream storage directory of the embedded NATS server")
	fs.StringVar(&c.natsURL, "nats-url", "", "use these NATS servers (comma-separated nats:// URLs) instead of the embedded one")
	fs.StringVar(&c.natsListen, "nats-listen", "127.0.0.1:4222", "client address of the embedded NATS server, for NATS programs (empty: in-process only)")
	fs.IntVar(&c.replicas, "replicas", 1, "replicas of each queue's stream (3 recommended in a cluster)")
	fs.Int64Var(&c.maxBody, "max-body", 256<<20, "largest request body (message) in bytes")
	fs.IntVar(&c.maxPayload, "max-payload", 8<<20, "embedded NATS max_payload in bytes; larger messages go to the Object Store")
	fs.BoolVar(&c.syncAlways, "sync-always", false, "embedded NATS fsyncs every write (durable across power loss, slower)")
	fs.StringVar(&c.serverName, "server-name", "", "embedded NATS server name (required in a cluster, unique per node)")
	fs.StringVar(&c.clusterName, "cluster-name", "", "form a JetStream cluster of embedded servers with this name")
	fs.StringVar(&c.clusterListen, "cluster-listen", "", "cluster route address of the embedded server (host:port)")
	fs.StringVar(&c.routes, "routes", "", "cluster routes, comma-separated nats-route:// URLs of all nodes")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: lmq-gateway [flags]\n\nEvery flag can also be set by an environment variable: --http-listen is LMQ_HTTP_LISTEN.\nFlags override environment variables.\n\n")
		fs.PrintDefaults()
	}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		key := "LMQ_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(key); ok {
			if err := f.Value.Set(v); err != nil && envErr == nil {
				envErr = fmt.Errorf("%s=%q: %w", key, v, err)
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return c, nil
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

func run(ctx context.Context, args []string, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(c, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	nc, ns, err := connectNATS(c, log)
	if err != nil {
		return err
	}
	defer func() {
		_ = nc.Drain()
		if ns != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			ns.Shutdown(sctx)
			cancel()
		}
	}()

	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	core, err := gateway.New(startCtx, nc, gateway.Config{Replicas: c.replicas, MaxMessageSize: c.maxBody, Logger: log})
	cancel()
	if err != nil {
		return fmt.Errorf("start core: %w", err)
	}
	defer core.Close()

	hl, err := net.Listen("tcp", c.httpListen)
	if err != nil {
		return fmt.Errorf("http listen: %w", err)
	}
	srv := &http.Server{
		Handler:           httpapi.New(core, httpapi.Options{MaxBodyBytes: c.maxBody, Logger: log}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(hl) }()
	log.Info("lmq-gateway serving", "http", hl.Addr().String(), "nats", natsWhere(c, ns))

	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err = <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
	}
	stop() // a second signal now ends the process at once
	// Waiting long-polls answer empty once the core closes; then in-flight
	// requests finish.
	sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer scancel()
	core.Close()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	return nil
}

func natsWhere(c *config, ns *embedded.Server) string {
	if ns == nil {
		return c.natsURL
	}
	if u := ns.ClientURL(); u != "" {
		return "embedded " + u
	}
	return "embedded (in-process)"
}

func connectNATS(c *config, log *slog.Logger) (*nats.Conn, *embedded.Server, error) {
	opts := []nats.Option{
		nats.Name("lmq-gateway"),
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("nats disconnected", "err", err) }),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "url", nc.ConnectedUrl()) }),
	}
	if c.natsURL != "" {
		nc, err := nats.Connect(c.natsURL, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("connect to NATS %s: %w", c.natsURL, err)
		}
		return nc, nil, nil
	}
	var routes []string
	if c.routes != "" {
		routes = strings.Split(c.routes, ",")
	}
	ns, err := embedded.Start(embedded.Options{
		DataDir:       c.dataDir,
		Listen:        c.natsListen,
		ServerName:    c.serverName,
		ClusterName:   c.clusterName,
		ClusterListen: c.clusterListen,
		Routes:        routes,
		MaxPayload:    int32(c.maxPayload),
		SyncAlways:    c.syncAlways,
		Logger:        log,
	})
	if err != nil {
		return nil, nil, err
	}
	nc, err := ns.Connect("lmq-gateway", opts[1:]...)
	if err != nil {
		ns.Shutdown(context.Background())
		return nil, nil, err
	}
	return nc, ns, nil
}
