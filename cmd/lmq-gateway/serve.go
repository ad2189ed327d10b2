package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/accumulator"
	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/httpapi"
	"github.com/lmq-gateway/lmq-gateway/internal/connlimit"
	"github.com/lmq-gateway/lmq-gateway/natsconn"
	"github.com/lmq-gateway/lmq-gateway/ops"
	"github.com/lmq-gateway/lmq-gateway/rpc"
)

// serve runs the gateway until SIGINT or SIGTERM, then shuts it down
// gracefully; a second signal ends the process at once.
func serve(ctx context.Context, args []string, stderr io.Writer) error {
	c, err := parseConfig(args, os.LookupEnv, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(c, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	watchSignals(cancel, done, log)

	var tlsConfig *tls.Config
	if c.tlsCert != "" {
		// Loaded now so that a bad file fails the start, not the first client.
		cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	dialect, err := rpc.ParseDialect(c.rpcDialect)
	if err != nil {
		return err
	}
	rpcTLS, err := c.limits.rpcTLSConfig()
	if err != nil {
		return err
	}

	nc, ns, err := connectNATS(ctx, c, log)
	if err != nil {
		return err
	}
	defer closeNATS(nc, ns, log)
	// A cluster's nodes may start in any order: wait for a meta leader
	// instead of failing the start (natsconn.WaitJetStream).
	if err := natsconn.WaitJetStream(ctx, nc, log); err != nil {
		return err
	}

	stats := ops.NewStats(ops.StatsOptions{})
	// The embedded server's store watchdog: a full disk shows in /readyz and
	// fails pushes at once until it recovered (embedded/storewatch.go).
	var storeHealth func() error
	if ns != nil {
		storeHealth = ns.StoreError
	}
	core, err := retryStart(ctx, log, "core", func(ctx context.Context) (*gateway.Gateway, error) {
		return gateway.New(ctx, nc, gateway.Config{
			Replicas:        c.replicas,
			MaxMessageSize:  c.maxBody,
			MaxBufferedBody: c.maxBuffered,
			StoreHealth:     storeHealth,
			Observer:        stats,
			Logger:          log,
		})
	})
	if err != nil {
		return err
	}
	defer core.Close()
	acc, err := retryStart(ctx, log, "accumulator", func(ctx context.Context) (*accumulator.Accumulator, error) {
		return accumulator.New(ctx, core, accumulator.Config{Replicas: c.replicas, Logger: log})
	})
	if err != nil {
		return err
	}
	// Closed after the front ends drained (shutdown), before the core.
	defer acc.Close()
	core.SetAccumulator(acc)

	o := ops.New(core, stats, ops.Options{
		Logger:          log,
		AccessLog:       c.accessLog,
		Auth:            authOf(c),
		MaxWaitingPulls: c.maxWaitingPulls,
		Version:         versionString(),
		Replicas:        c.replicas,
		Nodes:           nodesOf(nc, ns),
	})
	// Background work (meters, StatsD) outlives the signal: it stops after
	// the front ends, so that StatsD's last flush counts their last requests.
	bgCtx, bgCancel := context.WithCancel(context.WithoutCancel(ctx))
	var bg sync.WaitGroup
	defer func() {
		bgCancel()
		bg.Wait()
	}()
	bg.Go(func() { stats.Run(bgCtx, core.QueueNames) })
	if c.statsdAddr != "" {
		sd := o.NewStatsD(c.statsdAddr, c.statsdInterval)
		bg.Go(func() {
			if err := sd.Run(bgCtx); err != nil {
				log.Error("statsd", "err", err)
			}
		})
	}

	hl, err := net.Listen("tcp", c.httpListen)
	if err != nil {
		return fmt.Errorf("http listen: %w", err)
	}
	hl = connlimit.Listen(hl, c.limits.maxHTTPConns)
	srv := &http.Server{
		Handler: httpapi.New(core, httpapi.Options{
			MaxBodyBytes:    c.maxBody,
			MaxBufferedBody: c.maxBuffered,
			Logger:          log,
			Mount:           o.Mount,
			Middleware:      o.Middleware,
			Timeouts:        c.limits.timeouts(),
		}),
		ConnContext:       httpapi.ConnContext,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: c.readHeaderTimeout,
		MaxHeaderBytes:    c.maxHeaderLen,
		IdleTimeout:       c.idleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 2)
	go func() {
		if tlsConfig != nil {
			errc <- fmt.Errorf("https: %w", srv.ServeTLS(hl, "", ""))
		} else {
			errc <- fmt.Errorf("http: %w", srv.Serve(hl))
		}
	}()

	var rs *rpc.Server
	rpcAddr := "off"
	if c.rpcListen != "" {
		rl, err := net.Listen("tcp", c.rpcListen)
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("rpc listen: %w", err)
		}
		rpcAddr = rl.Addr().String()
		c.limits.logRPCExposure(log, c, rl.Addr())
		if rpcTLS != nil {
			rl = tls.NewListener(rl, rpcTLS)
			rpcAddr = "tls://" + rpcAddr
		}
		rs = rpc.New(core, rpc.Options{
			Logger:                log,
			Dialect:               dialect,
			Limits:                rpc.Limits{MaxFrameSize: c.rpcMaxFrame},
			MaxConns:              c.limits.maxRPCConns,
			MaxTotalInFlightBytes: c.limits.rpcMaxInflightBytes,
		})
		// Serve's context is not the signal's: Shutdown ends it gracefully,
		// while a cancelled context would cut the connections.
		go func() {
			errc <- fmt.Errorf("rpc: %w", rs.Serve(context.WithoutCancel(ctx), o.Metrics().RPCListener(rl)))
		}()
	}
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	log.Info("lmq-gateway serving", "version", versionString(), scheme, hl.Addr().String(), "rpc", rpcAddr,
		"nats", natsWhere(c, ns), "auth", o.AuthMode())

	var failure error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-errc:
		failure = err
		log.Error("listener failed, shutting down", "err", err)
	}
	shutdown(c, log, o, core, srv, rs, acc)
	return failure
}

// shutdown stops the gateway in the order that loses nothing: readiness off
// (load balancers stop sending), the core closed (waiting pulls answer empty:
// 204 over HTTP, "empty" over RPC), the front ends drained (requests in
// flight finish, then connections close), the deliveries nobody answered
// released, so that they are available at once instead of after their
// timeout, and the accumulator stopped. The caller's defers then stop StatsD (last flush), flush NATS and
// stop the embedded server.
func shutdown(c *config, log *slog.Logger, o *ops.Ops, core *gateway.Gateway, srv *http.Server, rs *rpc.Server, acc *accumulator.Accumulator) {
	o.Drain()
	core.Close()
	ctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Shutdown(ctx); err != nil {
			log.Warn("http shutdown: closing connections still busy", "err", err)
			_ = srv.Close()
		}
	})
	if rs != nil {
		wg.Go(func() {
			if err := rs.Shutdown(ctx); err != nil {
				log.Warn("rpc shutdown: closing connections still busy", "err", err)
			}
		})
	}
	wg.Wait()
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if n := core.ReleaseAll(rctx); n > 0 {
		log.Info("released unanswered deliveries", "count", n)
	}
	// Pushes to accumulating queues are over; windows left open are closed
	// by another gateway, or by this one after a restart.
	acc.Close()
}

// watchSignals cancels on the first SIGINT or SIGTERM and exits the process
// on the second (until done is closed).
func watchSignals(cancel context.CancelFunc, done <-chan struct{}, log *slog.Logger) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		defer signal.Stop(sigs)
		select {
		case s := <-sigs:
			log.Info("signal received; shutting down (send it again to exit at once)", "signal", s.String())
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-sigs:
			log.Warn("second signal; exiting at once", "signal", s.String())
			os.Exit(2)
		case <-done:
		}
	}()
}

func authOf(c *config) ops.Auth {
	a := ops.Auth{BearerToken: c.authToken}
	if c.authBasic != "" {
		a.BasicUser, a.BasicPassword, _ = strings.Cut(c.authBasic, ":")
	}
	return a
}

// nodesOf lists the NATS servers for /stats: with the embedded server, the
// JetStream cluster as it sees it; with an external deployment, the server
// this gateway is connected to (package ops adds the servers holding queues).
func nodesOf(nc *nats.Conn, ns *embedded.Server) func(context.Context) (ops.Nodes, error) {
	if ns == nil {
		return func(context.Context) (ops.Nodes, error) {
			var n ops.Nodes
			if name := nc.ConnectedServerName(); name != "" {
				n.Active, n.All = []string{name}, []string{name}
			}
			return n, nil
		}
	}
	return func(context.Context) (ops.Nodes, error) {
		s := ns.NATS()
		self := s.Name()
		n := ops.Nodes{Active: []string{self}, All: []string{self}}
		jsz, err := s.Jsz(&server.JSzOptions{})
		if err != nil {
			return ops.Nodes{}, fmt.Errorf("jsz: %w", err)
		}
		if m := jsz.Meta; m != nil {
			if m.Leader != "" {
				n.Active, n.All = append(n.Active, m.Leader), append(n.All, m.Leader)
			}
			for _, p := range m.Replicas {
				if p == nil {
					continue
				}
				n.All = append(n.All, p.Name)
				if !p.Offline {
					n.Active = append(n.Active, p.Name)
				}
			}
		}
		return n, nil
	}
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

func connectNATS(ctx context.Context, c *config, log *slog.Logger) (*nats.Conn, *embedded.Server, error) {
	opts := []nats.Option{
		nats.Name("lmq-gateway"),
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "url", nc.ConnectedUrl()) }),
	}
	if c.natsURL != "" {
		o := c.nats
		o.URLs, o.Name, o.Logger = c.natsURL, "lmq-gateway", log
		nc, err := natsconn.Connect(ctx, o)
		if err != nil {
			return nil, nil, err
		}
		return nc, nil, nil
	}
	name := c.serverName
	if name == "" && c.clusterName == "" && c.clusterListen == "" && c.routes == "" {
		// A single node named after its host, rather than the random id the
		// server picks at every start, reads better in /stats and status.
		if h, err := os.Hostname(); err == nil && h != "" {
			name = h
		}
	}
	var routes []string
	if c.routes != "" {
		routes = strings.Split(c.routes, ",")
	}
	ns, err := embedded.Start(embedded.Options{
		DataDir:       c.dataDir,
		Listen:        c.natsListen,
		ServerName:    name,
		ClusterName:   c.clusterName,
		ClusterListen: c.clusterListen,
		Routes:        routes,
		MaxPayload:    int32(c.maxPayload),
		SyncAlways:    c.syncAlways,
		Logger:        log,
		ClientAuth:    c.natsAuth.clientAuth(),
	})
	if err != nil {
		return nil, nil, err
	}
	logNATSAuth(log, ns)
	nc, err := ns.Connect("lmq-gateway", opts[1:]...)
	if err != nil {
		ns.Shutdown(context.Background())
		return nil, nil, err
	}
	return nc, ns, nil
}

// logNATSAuth says how NATS programs get in, and warns loudly when anyone
// can.
func logNATSAuth(log *slog.Logger, ns *embedded.Server) {
	addr := ns.ClientURL()
	switch {
	case addr == "":
	case ns.ClientUser() == "":
		log.Warn("EMBEDDED NATS PORT IS OPEN (--nats-listen-auth none): anyone who can connect to it reads, changes and deletes every queue, whatever --auth-token or --auth-basic say",
			"nats", addr)
	case ns.ClientURLFile() != "":
		log.Info("embedded NATS port requires a user and password; the URL with both is in the data directory",
			"nats", addr, "user", ns.ClientUser(), "url-file", ns.ClientURLFile())
	default:
		log.Info("embedded NATS port requires --nats-listen-user and --nats-listen-password", "nats", addr, "user", ns.ClientUser())
	}
}

// closeNATS flushes what this gateway published, closes the connection and
// stops the embedded server, which then leaves its files consistent.
func closeNATS(nc *nats.Conn, ns *embedded.Server, log *slog.Logger) {
	if err := nc.FlushTimeout(5 * time.Second); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		log.Warn("nats flush", "err", err)
	}
	nc.Close()
	if ns != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ns.Shutdown(ctx)
		cancel()
	}
}
