// Package server is the lmq-gateway daemon: it connects to NATS (an embedded
// nats-server or an existing deployment), starts the core (package gateway),
// moves queues of the old one-stream-per-queue layout into it (package
// upgrade), starts the accumulator, and serves the three front ends until it
// is shut down: HTTP (httpapi, with the operations endpoints of ops and the
// web console of console), MessagePack-RPC (rpc) and, when asked, SQS
// (sqs). Command lmq-gateway parses the settings into a Config and handles
// the signals; everything that runs is started and stopped here.
//
// Life cycle: New connects and starts everything but the front ends' serving
// (the listeners are bound, so a taken port fails New and the addresses are
// known: HTTPAddr, RPCAddr); Serve serves until its context ends or a
// listener fails; Shutdown stops in the order that loses nothing:
//
//  1. stop accepting: /readyz answers 503, the listeners are closed;
//  2. answer waiting long-polls empty (gateway.StopWaiting);
//  3. drain the requests in flight, within Shutdown's context, while the core
//     still serves replies relayed from other gateways (an ack sent through
//     another gateway for a delivery this one holds still succeeds);
//  4. release the deliveries nobody answered (gateway.ReleaseAll), so they
//     are available at once instead of after their timeout;
//  5. stop the background work (StatsD's last flush), the accumulator, then
//     the core (which closes the subscription for relayed replies);
//  6. flush and close the NATS connection, and stop the embedded server.
//
// Every goroutine the server starts is owned by it: the front ends' serve
// loops and the background work are stopped and waited for by Shutdown.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/accumulator"
	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/console"
	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/httpapi"
	"github.com/lmq-gateway/lmq-gateway/internal/connlimit"
	"github.com/lmq-gateway/lmq-gateway/internal/route"
	"github.com/lmq-gateway/lmq-gateway/store/bus"

	"github.com/lmq-gateway/lmq-gateway/internal/lifecycle"

	"github.com/lmq-gateway/lmq-gateway/natsconn"
	"github.com/lmq-gateway/lmq-gateway/ops"
	"github.com/lmq-gateway/lmq-gateway/rpc"
	"github.com/lmq-gateway/lmq-gateway/rpc/wire"
	"github.com/lmq-gateway/lmq-gateway/upgrade"
)

// Config is everything a server needs; command lmq-gateway fills it from its
// flags, environment and config file (see its --help for each setting).
type Config struct {
	// HTTPListen is the HTTP API's address ("127.0.0.1:0" picks a port).
	HTTPListen string
	// HTTPListener, when set, is served instead of binding HTTPListen (the
	// server closes it). With neither, HTTP is off and only the in-process
	// API (Core, used by package lmq) is served.
	HTTPListener net.Listener
	// HTTPTLS serves HTTPS when set.
	HTTPTLS *tls.Config
	// MaxHTTPConns bounds the HTTP connections open at once (0: no bound).
	MaxHTTPConns int
	// MaxBody bounds a request body; MaxBuffered the bodies held in memory
	// whole (gateway.Config.MaxMessageSize and MaxBufferedBody).
	MaxBody, MaxBuffered int64
	// MaxHeaderBytes, ReadHeaderTimeout and IdleTimeout are the http.Server's.
	MaxHeaderBytes    int
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	// Timeouts bound reading request bodies and writing answers.
	Timeouts httpapi.Timeouts
	// MaxWaitingPulls bounds the pulls (HTTP, RPC and SQS) waiting at once
	// (0: no bound).
	MaxWaitingPulls int
	// MaxQueues bounds the queues that exist (gateway.Config.MaxQueues; 0:
	// no bound).
	MaxQueues int
	// AccessLog logs every HTTP request at level info.
	AccessLog bool
	// Auth protects the HTTP endpoints but /healthz and /readyz when enabled.
	// With Tokens it is the operator's credential (every right).
	Auth auth.Credential
	// Tokens turns on token authentication (--tokens): the tokens of the
	// KV bucket auth.TokensBucket, managed at /tokens (package auth).
	Tokens bool
	// AllowedOrigins are the browser origins ("https://console.example")
	// whose state-changing requests are served although they come from a
	// page of another origin than the gateway's; every other such request is
	// refused (httpapi.NewCrossOriginProtection), on the HTTP and the SQS
	// ports (sqs.Options.CrossOrigin).
	AllowedOrigins []string

	// RPCListen is the MessagePack-RPC address; "" turns RPC off.
	RPCListen string
	// RPCListener, when set, is served instead of binding RPCListen (the
	// server closes it).
	RPCListener net.Listener
	// RPCTLS serves RPC over TLS when set; RPCClientCA names the file of
	// the CA that RPCTLS requires client certificates from ("": none), for
	// the log.
	RPCTLS      *tls.Config
	RPCClientCA string
	// RPCDialect is the MessagePack dialect of RPC answers.
	RPCDialect wire.Dialect
	// RPCMaxFrame bounds one RPC request; MaxRPCConns the connections open at
	// once and RPCMaxInflightBytes the request bytes held across them (0: no
	// bound).
	RPCMaxFrame         int
	MaxRPCConns         int
	RPCMaxInflightBytes int
	// RPCRequestTimeout, RPCWriteTimeout, RPCMaxAnswerBytes and
	// RPCMaxTotalAnswerBytes are rpc.Options' RequestTimeout, WriteTimeout,
	// MaxAnswerBytes and MaxTotalAnswerBytes (0: the default; negative: no
	// bound, where rpc allows none).
	RPCRequestTimeout      time.Duration
	RPCWriteTimeout        time.Duration
	RPCMaxAnswerBytes      int
	RPCMaxTotalAnswerBytes int

	// SQSListen is the SQS API's address (package sqs); "" turns it off
	// (the default). SQSListener, when set, is served instead.
	SQSListen   string
	SQSListener net.Listener
	// SQSTLS serves the SQS API over HTTPS when set.
	SQSTLS *tls.Config
	// SQSAccount and SQSRegion are the account id of queue URLs and ARNs
	// and the region of ARNs (sqs.Options).
	SQSAccount, SQSRegion string
	// MaxSQSConns bounds the SQS connections open at once (0: no bound);
	// SQSMaxRequestBytes a request body.
	MaxSQSConns        int
	SQSMaxRequestBytes int64
	// SQSAuthenticate checks a request's AWS signature (sqs.Options); nil:
	// any credentials are accepted.
	SQSAuthenticate func(r *http.Request, body []byte) (*auth.SigV4Result, error)

	// NATSURL lists the servers of an existing NATS deployment, reached with
	// the settings of NATS; "" starts the embedded server of Embedded instead
	// (its Logger is the server's).
	NATSURL string
	// NATSWait bounds the wait for a server of NATSURL to answer at start
	// (0: until ctx ends).
	NATSWait time.Duration
	NATS     natsconn.Options
	Embedded embedded.Options
	// Replicas of each queue's stream and of the gateway's buckets.
	Replicas int
	// FileConsumers keeps the queues' consumer state in files instead of
	// memory (gateway.Config.FileConsumers, --consumer-storage file).
	FileConsumers bool

	// DebugListen serves net/http/pprof (/debug/pprof/) on a listener of its
	// own, never the API's ("": off, the default). It has no authentication
	// and exposes the process's memory and code: loopback only in practice.
	DebugListen string

	// NoUI turns off the web console at /ui/ (package console); it is on
	// by default, behind the API's authentication.
	NoUI bool

	// StatsDAddr receives LMQ's StatsD metrics every StatsDInterval ("": off).
	StatsDAddr     string
	StatsDInterval time.Duration

	// NATSBound, when set, is called with the embedded server's ports as
	// soon as it listens, before New waits for JetStream: the node of a new
	// cluster becomes ready only once other nodes have joined it, and they
	// need its route port (bound to port 0) to do so. Addrs reports every
	// port once New returns.
	NATSBound func(Addrs)

	// Version is reported in the start line and by lmq_build_info.
	Version string
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
}

// Server is a running gateway. Create it with New, run it with Serve, stop
// it with Shutdown.
type Server struct {
	cfg Config
	log *slog.Logger

	bus   *bus.Bus
	ns    *embedded.Server // nil with Config.NATSURL
	stats *ops.Stats
	core  *gateway.Gateway
	acc   *accumulator.Accumulator
	ops   *ops.Ops
	ui    *console.Console // nil with Config.NoUI
	// life is what New started, in order (New's list): NATS, the core, the
	// accumulator, the listeners; Shutdown stops it in reverse.
	life *lifecycle.Group

	hl       *stopListener
	http     *http.Server
	handlers sync.WaitGroup // HTTP handlers running (track)
	rl       *stopListener  // nil when RPC is off
	rpc      *rpc.Server
	rpcAddr  string        // for the log: "off", host:port or tls://host:port
	dl       *stopListener // nil when the debug listener is off
	debug    *http.Server
	cop      *http.CrossOriginProtection // of Config.AllowedOrigins
	sl       *stopListener               // nil when SQS is off
	sqs      *http.Server
	sqsAddr  net.Addr

	// mu orders Serve's start against Shutdown's: either Serve started its
	// goroutines before Shutdown began, and Shutdown stops them, or Serve
	// sees stopping closed and starts nothing.
	mu       sync.Mutex
	serving  bool             // Serve was called
	stopping chan struct{}    // closed when Shutdown starts
	bg       *lifecycle.Group // statistics meters, the console's sampler, StatsD; nil before Serve
	errc     chan error       // a serve loop's failure, for Serve
	front    sync.WaitGroup   // the HTTP and RPC serve loops

	shutOnce sync.Once
	shutErr  error
}

// New connects to NATS, waits for JetStream, starts the core, upgrades the
// layout if need be, starts the accumulator and binds the listeners. ctx
// bounds the start (a signal during it ends the start); its deadline does
// not cut a layout upgrade short (package upgrade). On failure everything
// started is stopped again.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		rpcAddr:  "off",
		stopping: make(chan struct{}),
		errc:     make(chan error, 2),
	}
	// Before anything starts: a wrong origin is a mistake in the settings.
	var err error
	if s.cop, err = httpapi.NewCrossOriginProtection(cfg.AllowedOrigins); err != nil {
		return nil, fmt.Errorf("allowed origins: %w", err)
	}
	// What New starts, in order: Shutdown stops it in reverse after the
	// front ends drained (steps 5 and 6 of the package doc), and so does a
	// failed New (lifecycle.Group: one undo path).
	s.life = lifecycle.NewGroup(
		lifecycle.Func(s.startNATS, s.closeNATS),
		lifecycle.Func(s.startCore, func() { s.core.Close() }),
		// Queues of the one-stream-per-queue layout move into the shards
		// before anything is served, and before the accumulator runs the
		// close jobs the upgrade fixes. It returns at once when there is
		// none; otherwise it may take longer than an attempt allows and
		// ignores that deadline (not a cancel).
		lifecycle.Func(func(ctx context.Context) error {
			_, err := retryStart(ctx, s.log, "layout upgrade", func(ctx context.Context) (struct{}, error) {
				return struct{}{}, upgrade.Run(ctx, upgrade.Deps{NATS: s.bus, Core: upgrade.Core{Gateway: s.core, Logs: s.core.Logs()}, Domain: cfg.NATS.Domain, Logger: s.log})
			})
			return err
		}, nil),
		lifecycle.Func(s.startAccumulator, func() { s.acc.Stop() }),
		// The listeners' Stop is Shutdown's step 1 (a second Close is a
		// no-op); here only for a failed New.
		lifecycle.Func(s.startFront, s.closeListeners),
	)
	if err := s.life.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// startNATS connects to NATS (starting the embedded server) and waits for
// JetStream.
func (s *Server) startNATS(ctx context.Context) error {
	var err error
	if s.bus, s.ns, err = s.connectNATS(ctx); err != nil {
		return err
	}
	if a := s.natsAddrs(); s.cfg.NATSBound != nil && a != (Addrs{}) {
		s.cfg.NATSBound(a)
	}
	// A cluster's nodes may start in any order: wait for a meta leader
	// instead of failing the start (natsconn.WaitJetStream).
	if err := natsconn.WaitJetStreamOn(ctx, s.bus, s.cfg.NATS.Domain, s.log); err != nil {
		s.closeNATS()
		return err
	}
	return nil
}

// startCore starts the core, the observer of the statistics.
func (s *Server) startCore(ctx context.Context) error {
	cfg := s.cfg
	s.stats = ops.NewStats(ops.StatsOptions{})
	// The embedded server's store watchdog: a full disk shows in /readyz and
	// fails pushes at once until it recovered (embedded/storewatch.go).
	var storeHealth func() error
	if s.ns != nil {
		storeHealth = s.ns.StoreError
	}
	var err error
	s.core, err = retryStart(ctx, s.log, "core", func(ctx context.Context) (*gateway.Gateway, error) {
		return gateway.New(ctx, s.bus, gateway.Config{
			Replicas:        cfg.Replicas,
			FileConsumers:   cfg.FileConsumers,
			MaxMessageSize:  cfg.MaxBody,
			MaxBufferedBody: cfg.MaxBuffered,
			MaxWaitingPulls: cfg.MaxWaitingPulls,
			MaxQueues:       cfg.MaxQueues,
			Domain:          cfg.NATS.Domain,
			StoreHealth:     storeHealth,
			Observer:        s.stats,
			Logger:          s.log,
		})
	})
	return err
}

// startAccumulator starts the accumulator and installs it in the core.
func (s *Server) startAccumulator(ctx context.Context) error {
	s.acc = accumulator.New(s.bus, s.core, accumulator.Config{Replicas: s.cfg.Replicas, Domain: s.cfg.NATS.Domain, Logger: s.log})
	if _, err := retryStart(ctx, s.log, "accumulator", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, s.acc.Start(ctx)
	}); err != nil {
		return err
	}
	s.core.SetAccumulator(s.acc)
	return nil
}

// startFront opens the access tokens, builds the operations endpoints and
// binds the front ends' listeners (served by Serve).
func (s *Server) startFront(ctx context.Context) error {
	cfg := s.cfg
	opsOpt := ops.Options{
		Logger:    s.log,
		AccessLog: cfg.AccessLog,
		Auth:      cfg.Auth,
		Version:   cfg.Version,
		Nodes:     nodesOf(s.bus, s.ns),
	}
	if cfg.Tokens {
		// Watched until the core closes (the core owns the watcher).
		tokens, err := auth.Open(ctx, s.core, s.log)
		if err != nil {
			return err
		}
		opsOpt.Tokens = tokens
		if !cfg.Auth.Enabled() && tokens.Len() == 0 {
			s.log.Warn("--tokens without --auth-token or --auth-basic, and no token exists: no request can authenticate until a token is created through another gateway")
		}
	}
	s.ops = ops.New(ops.CoreOf(s.core), s.stats, opsOpt)
	if guard := auth.NewGuard(cfg.Auth, opsOpt.Tokens); guard.Enabled() && s.cfg.SQSAuthenticate == nil {
		// The SQS API asks for the same credentials as the HTTP API, as AWS
		// signatures (auth.AuthenticateSigV4 says how they map).
		s.cfg.SQSAuthenticate = sigV4For(guard)
	}
	return s.listen()
}

// closeListeners closes the front ends' listeners: Shutdown's step 1, and
// the undo of a failed New.
func (s *Server) closeListeners() {
	_ = s.hl.Close()
	if s.rl != nil {
		_ = s.rl.Close()
	}
	_ = s.sl.Close()
	if s.dl != nil {
		_ = s.dl.Close()
	}
}

// listen binds the HTTP and RPC listeners and builds their servers.
func (s *Server) listen() error {
	cfg := s.cfg
	hl, err := s.bindHTTP()
	if err != nil {
		return err
	}
	if hl != nil {
		s.logHTTPExposure(hl.Addr())
		s.hl = &stopListener{Listener: connlimit.Listen(hl, cfg.MaxHTTPConns)}
	}
	// Deliveries pulled with X-Lmq-Release-On-Disconnect are released when
	// their connection closes (httpapi/connbound.go).
	bound := httpapi.NewConnBound(httpapi.CoreOf(s.core), s.log)
	mount := s.ops.Mount
	if !cfg.NoUI {
		// The console's page (no data) needs no credentials when a bearer
		// token can be typed into it; its API always does.
		ui, err := console.New(console.CoreOf(s.core), s.ops, console.Options{
			Version:     cfg.Version,
			PublicShell: cfg.Auth.BearerToken != "" || cfg.Tokens,
			Logger:      s.log,
			// s.rpc is built below, before anything is served.
			RPCConns: func() map[string]int {
				if s.rpc == nil {
					return nil
				}
				return s.rpc.ConnsByAddr()
			},
		})
		if err != nil {
			if s.hl != nil {
				_ = s.hl.Close()
			}
			return fmt.Errorf("web console: %w", err)
		}
		s.ui = ui
		mount = func(t *route.Table) {
			ui.Mount(t)
			s.ops.Mount(t)
		}
	}
	var api http.Handler = httpapi.New(httpapi.CoreOf(s.core), httpapi.Options{
		MaxBodyBytes:    cfg.MaxBody,
		MaxBufferedBody: cfg.MaxBuffered,
		Logger:          s.log,
		Mount:           mount,
		Middleware:      s.ops.Middleware,
		Timeouts:        cfg.Timeouts,
		ConnBound:       bound,
		CrossOrigin:     s.cop,
	})
	if s.ui != nil {
		api = s.ui.Shell(api)
	}
	s.http = &http.Server{
		Handler:           s.track(api),
		ConnContext:       httpapi.ConnContext,
		ConnState:         bound.ConnState,
		TLSConfig:         cfg.HTTPTLS,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if err := s.listenDebug(); err != nil {
		_ = s.hl.Close()
		return err
	}
	if err := s.listenSQS(); err != nil {
		_ = s.hl.Close()
		if s.dl != nil {
			_ = s.dl.Close()
		}
		return err
	}
	if cfg.RPCListen == "" && cfg.RPCListener == nil {
		return nil
	}
	rl, err := s.bindRPC()
	if err != nil {
		_ = s.hl.Close()
		_ = s.sl.Close()
		if s.dl != nil {
			_ = s.dl.Close()
		}
		return fmt.Errorf("--rpc-listen %s: %w", cfg.RPCListen, err)
	}
	s.rpcAddr = rl.Addr().String()
	s.logRPCExposure(rl.Addr())
	if cfg.RPCTLS != nil {
		rl = tls.NewListener(rl, cfg.RPCTLS)
		s.rpcAddr = "tls://" + s.rpcAddr
	}
	s.rl = &stopListener{Listener: s.ops.Metrics().RPCListener(rl)}
	s.rpc = rpc.New(rpc.CoreOf(s.core), rpc.Options{
		Logger:                s.log,
		Dialect:               cfg.RPCDialect,
		Limits:                wire.Limits{MaxFrameSize: cfg.RPCMaxFrame},
		MaxConns:              cfg.MaxRPCConns,
		MaxTotalInFlightBytes: cfg.RPCMaxInflightBytes,
		RequestTimeout:        cfg.RPCRequestTimeout,
		WriteTimeout:          cfg.RPCWriteTimeout,
		MaxAnswerBytes:        cfg.RPCMaxAnswerBytes,
		MaxTotalAnswerBytes:   cfg.RPCMaxTotalAnswerBytes,
	})
	return nil
}

// HTTPAddr is the address the HTTP API listens on (with its port when
// Config.HTTPListen asked for port 0); nil when HTTP is off.
func (s *Server) HTTPAddr() net.Addr {
	if s.hl == nil {
		return nil
	}
	return s.hl.Addr()
}

// RPCAddr is the address MessagePack-RPC listens on; nil when it is off.
func (s *Server) RPCAddr() net.Addr {
	if s.rl == nil {
		return nil
	}
	return s.rl.Addr()
}

// errServing: Serve runs once.
var errServing = errors.New("server: Serve called twice")

// The upgrade's Core is declared without an import of the core; these are
// its compile-time checks.
var (
	_ upgrade.Gateway = (*gateway.Gateway)(nil)
	_ upgrade.Logs    = (*gateway.Logs)(nil)
)

// Serve serves HTTP and RPC until ctx ends, a listener fails or Shutdown
// starts. It returns the listener's failure, or nil; either way the caller
// then calls Shutdown, which stops what Serve started.
func (s *Server) Serve(ctx context.Context) error {
	if err := s.start(ctx); err != nil || s.isStopping() {
		return err
	}
	select {
	case <-ctx.Done():
		s.log.Info("shutting down")
		return nil
	case <-s.stopping:
		return nil
	case err := <-s.errc:
		s.log.Error("listener failed, shutting down", "err", err)
		return err
	}
}

func (s *Server) isStopping() bool {
	select {
	case <-s.stopping:
		return true
	default:
		return false
	}
}

// start starts Serve's goroutines, unless Shutdown came first.
func (s *Server) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.serving {
		return errServing
	}
	s.serving = true
	if s.isStopping() {
		return nil
	}
	// Background services (meters, the console's sampler, StatsD) outlive
	// ctx: Shutdown stops them after the front ends, so that StatsD's last
	// flush counts their last requests.
	bg := []lifecycle.Service{s.stats.Meters(s.core.Queues().QueueNames)}
	if s.ui != nil {
		bg = append(bg, s.ui)
	}
	if s.cfg.StatsDAddr != "" {
		// StatsD that cannot start is logged, not fatal: metrics are no
		// reason to stop serving the API.
		sd := s.ops.NewStatsD(s.cfg.StatsDAddr, s.cfg.StatsDInterval)
		bg = append(bg, lifecycle.Func(func(ctx context.Context) error {
			if err := sd.Start(ctx); err != nil {
				s.log.Error("statsd", "err", err)
			}
			return nil
		}, sd.Stop))
	}
	s.bg = lifecycle.NewGroup(bg...)
	if err := s.bg.Start(ctx); err != nil {
		return err
	}

	s.front.Go(func() {
		if s.hl == nil {
			return // HTTP is off
		}
		var err error
		if s.cfg.HTTPTLS != nil {
			err = fmt.Errorf("https: %w", s.http.ServeTLS(s.hl, "", ""))
		} else {
			err = fmt.Errorf("http: %w", s.http.Serve(s.hl))
		}
		s.failed(err)
	})
	if s.debug != nil {
		// The debug listener's failure is logged, not fatal: profiling is
		// no reason to stop serving the API.
		s.front.Go(func() {
			if err := s.debug.Serve(s.dl); err != nil && !errors.Is(err, http.ErrServerClosed) && !s.isStopping() {
				s.log.Error("debug listener failed", "err", err)
			}
		})
	}
	if s.sqs != nil {
		s.front.Go(func() {
			if err := s.sqs.Serve(s.sl); err != nil {
				s.failed(fmt.Errorf("sqs: %w", err))
			}
		})
	}
	if s.rpc != nil {
		// Not ctx: Shutdown ends RPC gracefully, while a cancelled context
		// would cut the connections at once.
		rctx := context.WithoutCancel(ctx)
		s.front.Go(func() { s.failed(fmt.Errorf("rpc: %w", s.rpc.Serve(rctx, s.rl))) })
	}
	scheme := "http"
	if s.cfg.HTTPTLS != nil {
		scheme = "https"
	}
	s.log.Info("lmq-gateway serving", "version", s.cfg.Version, scheme, s.httpWhere(), "rpc", s.rpcAddr,
		"nats", s.natsWhere(), "auth", s.ops.AuthMode(), "sqs", s.sqsWhere())
	return nil
}

// failed reports a serve loop's end to Serve, unless Shutdown caused it (it
// closes the listeners).
func (s *Server) failed(err error) {
	select {
	case <-s.stopping:
	default:
		s.errc <- err // buffered for both loops
	}
}

// Shutdown stops the server in the order of the package documentation. ctx
// bounds the drain of the requests in flight: when it ends, the connections
// still busy are closed (and logged), and the shutdown goes on; the steps
// after it have bounds of their own. It returns an error when the drain was
// cut short. Later calls wait for the first and return its result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutOnce.Do(func() { s.shutErr = s.shutdown(ctx) })
	return s.shutErr
}

func (s *Server) shutdown(ctx context.Context) error {
	// 1. Stop accepting: load balancers see 503 on /readyz, new connections
	// are refused. (Before the long-polls end, so that their clients cannot
	// come back on a new connection.)
	s.mu.Lock()
	close(s.stopping)
	bg := s.bg
	s.mu.Unlock()
	s.ops.Drain()
	s.closeListeners()
	if s.debug != nil {
		// Profiles in progress are cut: nothing depends on them.
		_ = s.debug.Close()
	}
	// 2. Waiting pulls answer empty: 204 over HTTP, "empty" over RPC.
	s.core.StopWaiting()
	// 3. Requests in flight finish, then connections close. The core still
	// serves replies, relayed ones included.
	var drainErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.http.Shutdown(ctx); err != nil {
			s.log.Warn("http shutdown: closing connections still busy", "err", err)
			_ = s.http.Close()
			mu.Lock()
			drainErr = errors.Join(drainErr, fmt.Errorf("http: %w", err))
			mu.Unlock()
		}
	})
	if s.sqs != nil {
		wg.Go(func() {
			if err := s.sqs.Shutdown(ctx); err != nil {
				s.log.Warn("sqs shutdown: closing connections still busy", "err", err)
				_ = s.sqs.Close()
				mu.Lock()
				drainErr = errors.Join(drainErr, fmt.Errorf("sqs: %w", err))
				mu.Unlock()
			}
		})
	}
	if s.rpc != nil {
		wg.Go(func() {
			if err := s.rpc.Shutdown(ctx); err != nil {
				s.log.Warn("rpc shutdown: closing connections still busy", "err", err)
				mu.Lock()
				drainErr = errors.Join(drainErr, fmt.Errorf("rpc: %w", err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	s.front.Wait()
	s.waitHandlers()
	// 4. Deliveries nobody answered are available at once, not after their
	// timeout. A client that did get one and could not answer may see it
	// again.
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	if n := s.core.Messages().ReleaseAll(rctx); n > 0 {
		s.log.Info("released unanswered deliveries", "count", n)
	}
	rcancel()
	// 5. StatsD's last flush (the background services), then what New
	// started, in reverse: the accumulator (pushes to accumulating queues
	// are over; windows left open are closed by another gateway, or by this
	// one after a restart), then the core;
	// 6. and NATS last: everything above may still publish.
	if bg != nil {
		bg.Stop()
	}
	s.life.Stop()
	if drainErr != nil {
		return fmt.Errorf("shutdown: connections closed while busy: %w", drainErr)
	}
	return nil
}

// handlerGrace bounds the wait for HTTP handlers still running after their
// connections were closed (a cut drain): their contexts are cancelled, so
// they end at once unless something ignores the cancellation.
const handlerGrace = 5 * time.Second

// waitHandlers waits until no HTTP handler runs, so that none uses the core
// after Close; bounded by handlerGrace.
func (s *Server) waitHandlers() {
	done := make(chan struct{})
	go func() {
		s.handlers.Wait()
		close(done)
	}()
	t := time.NewTimer(handlerGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.log.Warn("http handlers still running after their connections closed", "waited", handlerGrace)
	}
}

// track counts the HTTP handlers running, for waitHandlers.
func (s *Server) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.handlers.Add(1)
		defer s.handlers.Done()
		h.ServeHTTP(w, r)
	})
}

// stopListener lets Shutdown close a listener before the server that
// serves it does: the second Close is a no-op, not an error that
// http.Server.Shutdown would return.
type stopListener struct {
	net.Listener
	once sync.Once
	err  error
}

func (l *stopListener) Close() error {
	if l == nil {
		return nil // HTTP is off
	}
	l.once.Do(func() { l.err = l.Listener.Close() })
	return l.err
}

// Core is the server's core, for a program that embeds the server and uses
// the queue in-process (package lmq) besides, or instead of, the front ends.
// It is valid from New until Shutdown returns.
func (s *Server) Core() *gateway.Gateway { return s.core }
