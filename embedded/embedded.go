// Package embedded starts and stops the in-process nats-server that the
// gateway uses by default: JetStream with file storage, a single node or one
// node of a cluster formed by several gateways.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Options configures the embedded server.
type Options struct {
	// DataDir is where JetStream stores its files (the server adds /jetstream).
	DataDir string
	// Listen is the client address ("127.0.0.1:4222"); "" means in-process only.
	Listen string
	// ServerName must be unique within a cluster; "" lets the server pick one.
	ServerName string
	// ClusterName, ClusterListen and Routes form a JetStream cluster of embedded
	// servers; all empty means a single node.
	ClusterName   string
	ClusterListen string
	Routes        []string
	// MaxPayload of one NATS message in bytes; 0 keeps the server default (1 MiB).
	MaxPayload int32
	// SyncAlways makes JetStream fsync every write.
	SyncAlways bool
	// Logger receives the server's log lines; nil silences it.
	Logger *slog.Logger
	// StartTimeout bounds the wait for the server to be ready (default 30s).
	StartTimeout time.Duration
}

// Server is a running embedded nats-server.
type Server struct {
	srv *server.Server
}

// Start starts the server and waits until it accepts connections.
func Start(opts Options) (*Server, error) {
	if opts.DataDir == "" {
		return nil, errors.New("embedded: data dir required")
	}
	so := &server.Options{
		ServerName: opts.ServerName,
		JetStream:  true,
		StoreDir:   opts.DataDir,
		MaxPayload: opts.MaxPayload,
		SyncAlways: opts.SyncAlways,
		NoSigs:     true,
		NoLog:      opts.Logger == nil,
	}
	if opts.MaxPayload > 0 && int64(opts.MaxPayload) > server.MAX_PENDING_SIZE {
		so.MaxPending = int64(opts.MaxPayload) * 2
	}
	if opts.Listen == "" {
		so.DontListen = true
	} else {
		host, port, err := splitHostPort(opts.Listen)
		if err != nil {
			return nil, fmt.Errorf("embedded: nats listen address: %w", err)
		}
		so.Host, so.Port = host, port
	}
	if opts.ClusterName != "" || opts.ClusterListen != "" || len(opts.Routes) > 0 {
		if opts.ServerName == "" {
			return nil, errors.New("embedded: a cluster node needs a server name")
		}
		host, port, err := splitHostPort(opts.ClusterListen)
		if err != nil {
			return nil, fmt.Errorf("embedded: cluster listen address: %w", err)
		}
		so.Cluster = server.ClusterOpts{Name: opts.ClusterName, Host: host, Port: port}
		for _, r := range opts.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, fmt.Errorf("embedded: route %q: %w", r, err)
			}
			so.Routes = append(so.Routes, u)
		}
	}
	srv, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	if opts.Logger != nil {
		srv.SetLoggerV2(&slogAdapter{l: opts.Logger.With("component", "nats-server")}, false, false, false)
	}
	srv.Start()
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if !srv.ReadyForConnections(timeout) {
		srv.Shutdown()
		return nil, errors.New("embedded: nats-server not ready in time")
	}
	return &Server{srv: srv}, nil
}

// Connect opens a client connection to the server: in-process when it does
// not listen, else over loopback TCP to its port.
func (s *Server) Connect(name string, extra ...nats.Option) (*nats.Conn, error) {
	opts := append([]nats.Option{nats.Name(name), nats.InProcessServer(s.srv), nats.MaxReconnects(-1)}, extra...)
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded: connect: %w", err)
	}
	return nc, nil
}

// ClientURL is the server's client URL, "" when it does not listen.
func (s *Server) ClientURL() string {
	if s.srv.Addr() == nil {
		return ""
	}
	return s.srv.ClientURL()
}

// NATS returns the underlying server, for tests and status reports.
func (s *Server) NATS() *server.Server { return s.srv }

// Shutdown stops the server and waits for it, or for ctx.
func (s *Server) Shutdown(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// slogAdapter feeds the server's printf-style logger into slog.
type slogAdapter struct{ l *slog.Logger }

func (a *slogAdapter) Noticef(f string, v ...any) { a.l.Info(fmt.Sprintf(f, v...)) }
func (a *slogAdapter) Warnf(f string, v ...any)   { a.l.Warn(fmt.Sprintf(f, v...)) }
func (a *slogAdapter) Fatalf(f string, v ...any)  { a.l.Error(fmt.Sprintf(f, v...)) }
func (a *slogAdapter) Errorf(f string, v ...any)  { a.l.Error(fmt.Sprintf(f, v...)) }
func (a *slogAdapter) Debugf(f string, v ...any)  { a.l.Debug(fmt.Sprintf(f, v...)) }
func (a *slogAdapter) Tracef(f string, v ...any)  { a.l.Debug(fmt.Sprintf(f, v...)) }
