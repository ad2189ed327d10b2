// Package embedded starts and stops the in-process nats-server that the
// gateway uses by default: JetStream with file storage, a single node or one
// node of a cluster formed by several gateways. A Server is a
// lifecycle.Service: New, then Start and Stop. Its storage limit is decided
// at start, never below what the store holds (storelimit.go), and a store
// watchdog recovers from a full disk (storewatch.go).
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/internal/lifecycle"
)

// Options configures the embedded server.
type Options struct {
	// DataDir is where JetStream stores its files (the server adds /jetstream).
	DataDir string
	// Listen is the client address ("127.0.0.1:4222"); "" means in-process only.
	Listen string
	// ClientAuth is how clients of Listen authenticate: by default with a
	// user and a password generated on the first start (ClientURLFile).
	// Unused without Listen: in-process connections are the program's own.
	ClientAuth ClientAuth
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
	// MaxStore is JetStream's storage limit in bytes (max_file_store);
	// 0 means 75% of the data directory's file system, at most what the
	// store holds plus 75% of the free space. Either is raised to what
	// the store holds at start plus a little (storelimit.go), so that a
	// restart never finds it below what is stored.
	MaxStore int64
	// Logger receives the server's log lines; nil silences it.
	Logger *slog.Logger
	// StartTimeout bounds the wait for the server to be ready (default 30s).
	StartTimeout time.Duration
	// StopTimeout bounds Stop's wait for the server to have stopped
	// (default 10s); see Stop.
	StopTimeout time.Duration
	// StoreCheckInterval is how often the store watchdog looks for streams
	// that hit a write error (a full disk) and, once the disk takes writes
	// again, restarts JetStream to clear them (default 2s; see StoreError).
	StoreCheckInterval time.Duration
}

// A route to another node that answers none of RouteMaxPingsOut pings sent
// RoutePingInterval apart is closed: the node shows down (no route: the
// gateway's status, console and /readyz?verbose) within about 5 s when it
// vanished without closing its connections (a lost machine or network, a
// frozen process). nats-server's defaults (a ping every 30 s for routes,
// two unanswered) took a minute or more. A live node answers at once; only a
// route stalled this long, when Raft elections are under way anyway, is
// cut and then made again.
const (
	RoutePingInterval = time.Second
	RouteMaxPingsOut  = 4
)

// Server is an embedded nats-server: made by New, started by Start, stopped
// by Stop (the lifecycle.Service contract). The other methods are for a
// started server.
type Server struct {
	opts Options
	srv  *server.Server // nil until Start succeeded
	lock *dirLock
	// watch is the store watchdog (storewatch.go).
	watch *storeWatch
	// user and password the server requires of clients, "" for none.
	user, password string
	// urlFile is the path of ClientURLFile when this start wrote it.
	urlFile string
	// stopOnce: Stop may be called again (a test's cleanup after the test
	// stopped the server itself) and then does nothing.
	stopOnce sync.Once
}

var _ lifecycle.Service = (*Server)(nil)

// defaultStopTimeout is Options.StopTimeout's default.
const defaultStopTimeout = 10 * time.Second

// New returns the embedded server of opts; nothing starts until Start.
func New(opts Options) *Server {
	return &Server{opts: opts}
}

// Start locks the data directory (one server per directory: a second
// process gets an error wrapping ErrDataDirLocked that names the holder's
// pid), starts the server and waits until it accepts connections, for at
// most Options.StartTimeout or until ctx ends. A Start that fails leaves
// nothing behind: no listener, no goroutine of the server, the directory
// unlocked. A server starts once.
func (s *Server) Start(ctx context.Context) (err error) {
	if s.srv != nil {
		return errors.New("embedded: server already started")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("embedded: start: %w", err)
	}
	opts := s.opts
	if opts.DataDir == "" {
		return errors.New("embedded: data dir required")
	}
	dir := opts.DataDir
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	// Checked before the server starts: nats-server reports a directory it
	// cannot use, and a port it cannot bind, only in its log and then never
	// becomes ready, which would leave the start waiting for StartTimeout.
	if err := checkDataDir(dir); err != nil {
		return err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			lock.release()
		}
	}()
	so := &server.Options{
		ServerName: opts.ServerName,
		JetStream:  true,
		StoreDir:   opts.DataDir,
		MaxPayload: opts.MaxPayload,
		SyncAlways: opts.SyncAlways,
		NoSigs:     true,
		NoLog:      opts.Logger == nil,
		// Measured with the directory locked: no other gateway writes it.
		JetStreamMaxStore: storeLimit(dir, opts.MaxStore, opts.Logger),
	}
	if opts.MaxPayload > 0 && int64(opts.MaxPayload) > server.MAX_PENDING_SIZE {
		so.MaxPending = int64(opts.MaxPayload) * 2
	}
	if opts.Listen == "" {
		so.DontListen = true
	} else {
		host, port, err := splitHostPort(opts.Listen)
		if err != nil {
			return fmt.Errorf("embedded: nats listen address: %w", err)
		}
		so.Host, so.Port = host, port
		if err := checkListen(opts.Listen, "--nats-listen", `another nats-server or gateway may be running; choose another address, or --nats-listen "" for in-process NATS only`); err != nil {
			return err
		}
	}
	var user, password string
	generated := false
	if opts.Listen != "" && !opts.ClientAuth.None {
		user, password, generated, err = clientCredentials(dir, opts.ClientAuth)
		if err != nil {
			return err
		}
		// Without accounts these users belong to the global account, where
		// JetStream and the gateway's streams are.
		so.Users = []*server.User{{Username: user, Password: password}}
	}
	if opts.ClusterName != "" || opts.ClusterListen != "" || len(opts.Routes) > 0 {
		if opts.ServerName == "" {
			return errors.New("embedded: a cluster node needs a server name")
		}
		host, port, err := splitHostPort(opts.ClusterListen)
		if err != nil {
			return fmt.Errorf("embedded: cluster listen address: %w", err)
		}
		so.Cluster = server.ClusterOpts{Name: opts.ClusterName, Host: host, Port: port,
			PingInterval: RoutePingInterval, MaxPingsOut: RouteMaxPingsOut}
		if err := checkListen(opts.ClusterListen, "--cluster-listen", "another node or program holds it; choose another address"); err != nil {
			return err
		}
		for _, r := range opts.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return fmt.Errorf("embedded: route %q: %w", r, err)
			}
			so.Routes = append(so.Routes, u)
		}
	}
	srv, err := server.NewServer(so)
	if err != nil {
		return fmt.Errorf("embedded: %w", err)
	}
	// The adapter is installed even without a Logger: it catches the
	// server's fatal errors (a listener or JetStream that failed to start),
	// after which the server never becomes ready.
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	fatal := make(chan string, 1)
	srv.SetLoggerV2(&slogAdapter{l: logger.With("component", "nats-server"), fatal: fatal}, false, false, false)
	srv.Start()
	if err := awaitReady(ctx, srv, opts.StartTimeout, fatal); err != nil {
		srv.Shutdown()
		srv.WaitForShutdown() // before the lock is released
		return err
	}
	var urlFile string
	if generated {
		// Rewritten at every start: the address may differ from last time.
		urlFile = filepath.Join(dir, ClientURLFile)
		if err := writeClientURL(urlFile, clientURL(srv.Addr(), user, password)); err != nil {
			srv.Shutdown()
			srv.WaitForShutdown()
			return err
		}
	}
	s.srv, s.lock, s.user, s.password, s.urlFile = srv, lock, user, password, urlFile
	s.watch = startStoreWatch(srv, dir, opts.StoreCheckInterval, opts.Logger)
	return nil
}

// Connect opens a client connection to the server: in-process when it does
// not listen, else over loopback TCP to its port.
func (s *Server) Connect(name string, extra ...nats.Option) (*nats.Conn, error) {
	// No flusher timeout: on the in-process connection (net.Pipe) nats.go
	// would set and clear a write deadline around every write, and each
	// set arms a timer; a write there only waits for this process's own
	// server to read, which its shutdown ends (the pipe is closed).
	opts := []nats.Option{nats.Name(name), nats.InProcessServer(s.srv), nats.MaxReconnects(-1), nats.FlusherTimeout(0)}
	if s.user != "" {
		// In-process clients pass the same authentication as remote ones.
		opts = append(opts, nats.UserInfo(s.user, s.password))
	}
	opts = append(opts, extra...)
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded: connect: %w", err)
	}
	return nc, nil
}

// ClientURL is the server's client URL without credentials, "" when it
// does not listen.
func (s *Server) ClientURL() string {
	if s.srv.Addr() == nil {
		return ""
	}
	return s.srv.ClientURL()
}

// ClientAddr is the address the client port is bound to ("" when the
// server does not listen): with port 0 in Options.Listen, the one the
// kernel picked.
func (s *Server) ClientAddr() string {
	if a := s.srv.Addr(); a != nil {
		return a.String()
	}
	return ""
}

// ClusterAddr is the address the cluster (route) port is bound to, "" for
// a single node.
func (s *Server) ClusterAddr() string {
	if a := s.srv.ClusterAddr(); a != nil {
		return a.String()
	}
	return ""
}

// ClientUser is the user clients of the port authenticate as, "" when the
// port is open to anyone (or there is no port).
func (s *Server) ClientUser() string { return s.user }

// ClientURLFile is the path of the file holding the client URL with the
// generated password, "" when this server did not write one (no port, no
// authentication, or a password given in Options).
func (s *Server) ClientURLFile() string { return s.urlFile }

// MaxStore is JetStream's storage limit in bytes (see Options.MaxStore),
// 0 while JetStream is off.
func (s *Server) MaxStore() int64 {
	if c := s.srv.JetStreamConfig(); c != nil {
		return c.MaxStore
	}
	return 0
}

// NATS returns the underlying server, for tests and status reports.
func (s *Server) NATS() *server.Server { return s.srv }

// Stop stops the store watchdog and the server, waits for the server to
// have stopped and then releases the data directory's lock. Its wait is
// bounded by Options.StopTimeout: a server that has not stopped by then is
// left to finish on its own (its lock released when it has, or at the
// process's end) and Stop returns, logging it. Stop does nothing on a
// server that never started, or the second time.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		if s.srv == nil {
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.watch.close()
			s.srv.Shutdown()
			s.srv.WaitForShutdown()
			s.lock.release()
		}()
		grace := s.opts.StopTimeout
		if grace <= 0 {
			grace = defaultStopTimeout
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			if s.opts.Logger != nil {
				s.opts.Logger.Warn("embedded nats-server has not stopped; leaving it to finish", "waited", grace)
			}
		}
	})
}

// splitHostPort splits a listen address into nats-server's host and port.
// Port 0 asks for a port the kernel picks, as for any listener: nats-server
// spells that RANDOM_PORT (-1), and reads 0 as "the default" (4222 for
// clients) or, for the cluster port, as "no cluster listener".
func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// slogAdapter feeds the server's printf-style logger into slog.
type slogAdapter struct {
	l *slog.Logger
	// fatal receives the first fatal error of the server (nil: not wanted).
	fatal chan<- string
}

func (a *slogAdapter) Noticef(f string, v ...any) { a.l.Info(fmt.Sprintf(f, v...)) }
func (a *slogAdapter) Warnf(f string, v ...any) {
	if f == plaintextPasswordsWarning {
		// Meant for passwords in configuration files. The client port's
		// password lives in this process's memory only (and in the 0600
		// ClientURLFile, which has to hold it for tools): a hash in the
		// server's options would protect nothing.
		a.l.Debug(f)
		return
	}
	a.l.Warn(fmt.Sprintf(f, v...))
}

// plaintextPasswordsWarning is nats-server's (2.15) warning about users with
// passwords that are not bcrypt hashes.
const plaintextPasswordsWarning = "Plaintext passwords detected, use nkeys or bcrypt"

func (a *slogAdapter) Fatalf(f string, v ...any) {
	msg := fmt.Sprintf(f, v...)
	a.l.Error(msg)
	if a.fatal != nil {
		select {
		case a.fatal <- msg: // the first one is the cause
		default:
		}
	}
}
func (a *slogAdapter) Errorf(f string, v ...any) { a.l.Error(fmt.Sprintf(f, v...)) }
func (a *slogAdapter) Debugf(f string, v ...any) { a.l.Debug(fmt.Sprintf(f, v...)) }
func (a *slogAdapter) Tracef(f string, v ...any) { a.l.Debug(fmt.Sprintf(f, v...)) }
