package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/rpc/wire"
	"github.com/lmq-gateway/lmq-gateway/server"
)

// serve runs the gateway (package server) until SIGINT or SIGTERM, then
// shuts it down gracefully; a second signal ends the process at once.
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

	sc, err := c.serverConfig(log)
	if err != nil {
		return err
	}
	var early error // the early --ports-file write's failure
	if c.portsFile != "" {
		sc.NATSBound = func(a server.Addrs) { early = writePortsFile(c.portsFile, a) }
	}
	srv, err := server.New(ctx, sc)
	if err != nil {
		return err
	}
	if c.portsFile != "" {
		// A program waiting for the file would wait forever: fail instead.
		if err := errors.Join(early, writePortsFile(c.portsFile, srv.Addrs())); err != nil {
			sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), c.shutdownTimeout)
			defer scancel()
			_ = srv.Shutdown(sctx)
			return err
		}
	}
	failure := srv.Serve(ctx)
	sctx, scancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
	defer scancel()
	// A drain cut short by --shutdown-timeout is logged by the server; it is
	// not a failure of the process, which exits 0 as after any SIGTERM.
	_ = srv.Shutdown(sctx)
	return failure
}

// serverConfig turns the settings into the server's Config, loading the TLS
// files now so that a bad file fails the start, not the first client.
func (c *config) serverConfig(log *slog.Logger) (server.Config, error) {
	var httpTLS *tls.Config
	if c.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return server.Config{}, fmt.Errorf("--tls-cert %s / --tls-key %s: %w", c.tlsCert, c.tlsKey, err)
		}
		httpTLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	dialect, err := wire.ParseDialect(c.rpcDialect)
	if err != nil {
		return server.Config{}, err
	}
	rpcTLS, err := c.limits.rpcTLSConfig()
	if err != nil {
		return server.Config{}, err
	}
	sqsTLS, err := c.sqs.tlsConfig()
	if err != nil {
		return server.Config{}, err
	}
	return server.Config{
		SQSListen:          c.sqs.listen,
		SQSTLS:             sqsTLS,
		SQSAccount:         c.sqs.account,
		SQSRegion:          c.sqs.region,
		MaxSQSConns:        c.sqs.maxConns,
		SQSMaxRequestBytes: c.sqs.maxRequest,

		HTTPListen:        c.httpListen,
		HTTPTLS:           httpTLS,
		MaxHTTPConns:      c.limits.maxHTTPConns,
		MaxBody:           c.maxBody,
		MaxBuffered:       c.maxBuffered,
		MaxHeaderBytes:    c.maxHeaderLen,
		ReadHeaderTimeout: c.readHeaderTimeout,
		IdleTimeout:       c.idleTimeout,
		Timeouts:          c.limits.timeouts(),
		MaxWaitingPulls:   c.maxWaitingPulls,
		MaxQueues:         c.limits.maxQueues,
		AccessLog:         c.accessLog,
		Auth:              authOf(c),
		Tokens:            c.tokens,
		AllowedOrigins:    c.origins(),

		RPCListen:           c.rpcListen,
		RPCTLS:              rpcTLS,
		RPCClientCA:         c.limits.rpcTLSClientCA,
		RPCDialect:          dialect,
		RPCMaxFrame:         c.rpcMaxFrame,
		MaxRPCConns:         c.limits.maxRPCConns,
		RPCMaxInflightBytes: c.limits.rpcMaxInflightBytes,
		// 0 on the command line is "no limit", which rpc spells negative.
		RPCRequestTimeout:      noLimitIfZero(c.limits.rpcRequestTimeout),
		RPCWriteTimeout:        c.limits.rpcWriteTimeout,
		RPCMaxAnswerBytes:      noLimitIfZero(c.limits.rpcMaxAnswerBytes),
		RPCMaxTotalAnswerBytes: noLimitIfZero(c.limits.rpcMaxAnswersTotal),

		NATSURL:       c.natsURL,
		NATSWait:      c.natsWait,
		NATS:          c.nats,
		Embedded:      c.embeddedOptions(),
		Replicas:      c.replicas,
		FileConsumers: c.consumerStore == "file",

		StatsDAddr:     c.statsdAddr,
		StatsDInterval: c.statsdInterval,

		DebugListen: c.debugListen,
		NoUI:        !c.ui,

		Version: versionString(),
		Logger:  log,
	}, nil
}

// embeddedOptions are the embedded server's settings (unused with
// --nats-url).
func (c *config) embeddedOptions() embedded.Options {
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
	return embedded.Options{
		DataDir:       c.dataDir,
		Listen:        c.natsListen,
		ServerName:    name,
		ClusterName:   c.clusterName,
		ClusterListen: c.clusterListen,
		Routes:        routes,
		MaxPayload:    int32(c.maxPayload),
		SyncAlways:    c.syncAlways,
		MaxStore:      int64(c.maxStore),
		ClientAuth:    c.natsAuth.clientAuth(),
	}
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

func authOf(c *config) auth.Credential {
	a := auth.Credential{BearerToken: c.authToken}
	if c.authBasic != "" {
		a.BasicUser, a.BasicPassword, _ = strings.Cut(c.authBasic, ":")
	}
	return a
}
