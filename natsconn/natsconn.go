// Package natsconn builds lmq-gateway's client connection to NATS: the
// servers of an external deployment with its credentials and TLS settings,
// and the connection behaviour every gateway wants whatever NATS it uses.
//
// A gateway is stateless in front of JetStream, so the connection is made to
// outlive any one server: it reconnects forever (to any server of the list or
// discovered from the cluster), buffers what is published while it does so,
// and pings often enough to notice a server that vanished without closing its
// sockets (a host crash or a partition) in seconds rather than minutes.
// Connection events are logged through slog, since they are what an operator
// looks for when a node of the cluster goes away.
package natsconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
)

// Defaults of the connection behaviour.
const (
	// DefaultReconnectWait is the pause before trying a server again. The
	// client tries the other servers of the list without it, so a failover
	// to a live node is immediate.
	DefaultReconnectWait = time.Second
	// DefaultReconnectBufSize is what may be published while reconnecting.
	// It holds a few messages of the embedded server's 8 MiB max_payload, so
	// that a large push during a failover waits for the new connection
	// instead of failing at once; beyond it publishes fail with
	// nats.ErrReconnectBufExceeded (a 503 to the client, which retries).
	DefaultReconnectBufSize = 32 << 20
	// DefaultPingInterval and DefaultMaxPingsOut detect a dead server within
	// about 30 s even when no TCP reset arrives (nats.go's defaults, 2 min
	// and 2 pings, would take 4 min).
	DefaultPingInterval = 10 * time.Second
	DefaultMaxPingsOut  = 3
	// initialRetryMax bounds the back-off between first-connection attempts.
	initialRetryMax = 5 * time.Second
)

// Options describe how to reach an external NATS deployment.
type Options struct {
	// URLs is a comma-separated list of server URLs (nats://, tls://, ws://);
	// the client picks one and fails over to the others and to servers the
	// cluster announces.
	URLs string
	// Name is the connection name shown by the server (monitoring, logs).
	Name string

	// At most one way to authenticate (URLs may also carry user:password):
	CredsFile string // a .creds file (JWT and NKey seed), for operator mode
	User      string // with Password
	Password  string
	Token     string

	// TLS: CAFile verifies the servers (a tls:// URL or a server requiring
	// TLS works with the system roots as well); CertFile and KeyFile, given
	// together, are the client certificate for servers that verify clients.
	CAFile   string
	CertFile string
	KeyFile  string

	// Domain is the JetStream domain the gateway uses ("": the account's
	// own JetStream), e.g. the hub's when connecting to a leaf node; see
	// gateway.Config.Domain. It does not change the connection itself.
	Domain string

	// Connection behaviour; zero values take the defaults above.
	ReconnectWait    time.Duration
	ReconnectBufSize int
	PingInterval     time.Duration
	MaxPingsOut      int

	// Logger receives connection events; slog.Default() when nil.
	Logger *slog.Logger
}

// Servers returns the cleaned list of server URLs; a bare host:port gets
// the nats:// scheme, as nats.go itself would give it.
func (o Options) Servers() []string {
	var out []string
	for _, s := range strings.Split(o.URLs, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		out = append(out, s)
	}
	return out
}

// Validate reports settings that cannot work together.
func (o Options) Validate() error {
	servers := o.Servers()
	if len(servers) == 0 {
		return errors.New("natsconn: no NATS server URL")
	}
	for _, s := range servers {
		u, err := url.Parse(s)
		if err != nil {
			return fmt.Errorf("natsconn: server URL %q: %w", s, err)
		}
		if u.Host == "" {
			return fmt.Errorf("natsconn: server URL %q: want [scheme://]host[:port], e.g. nats://127.0.0.1:4222", s)
		}
	}
	methods := 0
	for _, set := range []bool{o.CredsFile != "", o.User != "" || o.Password != "", o.Token != ""} {
		if set {
			methods++
		}
	}
	if methods > 1 {
		return errors.New("natsconn: give only one of credentials file, user/password and token")
	}
	if o.Password != "" && o.User == "" {
		return errors.New("natsconn: a NATS password needs a user")
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return errors.New("natsconn: a NATS client certificate and its key go together")
	}
	return nil
}

// NATSOptions returns the nats.go options for o: authentication, TLS,
// reconnection and logging handlers.
func (o Options) NATSOptions() ([]nats.Option, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	opts := Behaviour(o.Logger)
	if o.Name != "" {
		opts = append(opts, nats.Name(o.Name))
	}
	if o.ReconnectWait > 0 {
		opts = append(opts, nats.ReconnectWait(o.ReconnectWait))
	}
	if o.ReconnectBufSize != 0 {
		opts = append(opts, nats.ReconnectBufSize(o.ReconnectBufSize))
	}
	if o.PingInterval > 0 {
		opts = append(opts, nats.PingInterval(o.PingInterval))
	}
	if o.MaxPingsOut > 0 {
		opts = append(opts, nats.MaxPingsOutstanding(o.MaxPingsOut))
	}
	switch {
	case o.CredsFile != "":
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	case o.User != "":
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	case o.Token != "":
		opts = append(opts, nats.Token(o.Token))
	}
	if o.CAFile != "" {
		opts = append(opts, nats.RootCAs(o.CAFile))
	}
	if o.CertFile != "" {
		opts = append(opts, nats.ClientCert(o.CertFile, o.KeyFile))
	}
	return opts, nil
}

// Behaviour returns the options every gateway connection gets, to an
// external deployment or to the embedded server: reconnect forever with the
// default wait, buffer and pings, and log connection events to log (nil:
// slog.Default()). Options given after these override them.
func Behaviour(log *slog.Logger) []nats.Option {
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "nats-client")
	return []nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(DefaultReconnectWait),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.ReconnectBufSize(DefaultReconnectBufSize),
		nats.PingInterval(DefaultPingInterval),
		nats.MaxPingsOutstanding(DefaultMaxPingsOut),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS connection lost; reconnecting", "err", err)
				return
			}
			log.Info("NATS connection closed")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS reconnected", "url", nc.ConnectedUrlRedacted(), "server", nc.ConnectedServerName())
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); err != nil {
				log.Error("NATS connection closed for good", "err", err)
			}
		}),
		nats.DiscoveredServersHandler(func(nc *nats.Conn) {
			log.Info("NATS servers discovered", "servers", nc.DiscoveredServers())
		}),
		nats.LameDuckModeHandler(func(nc *nats.Conn) {
			log.Warn("NATS server entering lame duck mode; moving to another", "server", nc.ConnectedServerName())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Warn("NATS asynchronous error", "subject", sub.Subject, "err", err)
				return
			}
			log.Warn("NATS asynchronous error", "err", err)
		}),
	}
}

// Connect connects to the deployment o describes. When no server can be
// reached it keeps trying, with a growing pause, until ctx ends: in a
// deployment that starts all at once (compose, systemd) the gateway may well
// come up before NATS, and a server's host name may not resolve until its
// container runs. Other failures (authentication, TLS, bad settings) end it
// at once.
func Connect(ctx context.Context, o Options) (*nats.Conn, error) {
	opts, err := o.NATSOptions()
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	urls := strings.Join(o.Servers(), ",")
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		nc, err := nats.Connect(urls, opts...)
		if err == nil {
			log.Info("connected to NATS", "url", nc.ConnectedUrlRedacted(), "server", nc.ConnectedServerName())
			return nc, nil
		}
		if !unreachable(err) {
			return nil, fmt.Errorf("connect to NATS %s: %w", redact(o.Servers()), err)
		}
		// Every attempt is logged: the pause grows to initialRetryMax, so
		// that is a line every few seconds while NATS is away.
		log.Warn("no NATS server reachable yet; retrying", "servers", redact(o.Servers()), "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to NATS %s: %w (last error: %w)", redact(o.Servers()), ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(wait*2, initialRetryMax)
	}
}

// unreachable tells the failures that waiting may cure from those it cannot
// (authentication, TLS, a bad setting). A host name that does not resolve is
// one of the former: in a deployment that starts all at once (compose,
// Kubernetes) the NATS servers' names appear in DNS only once their
// containers run.
func unreachable(err error) bool {
	if errors.Is(err, nats.ErrNoServers) {
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	// Any other failure to open the TCP connection: a timeout, no route to
	// the host, a network that is not up yet.
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

// WaitJetStream returns once JetStream (of domain, "" for the account's own)
// answers on nc, or when ctx ends. A
// cluster has no JetStream until its nodes have elected a meta leader: a
// fresh embedded cluster only once all of its nodes have met, an existing
// one once a majority is up. Start-up waits for that instead of failing, so
// that the nodes of a cluster may be started in any order and at any pace.
func WaitJetStream(ctx context.Context, nc *nats.Conn, domain string, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	js, err := jsapi.New(nc, domain, "")
	if err != nil {
		return err
	}
	start := time.Now()
	lastLog := time.Time{}
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.AccountInfo(actx)
		cancel()
		if err == nil {
			if !lastLog.IsZero() {
				log.Info("JetStream available", "waited", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		if errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			// Waiting cannot help: the account has no JetStream. (A server
			// without JetStream looks like one still starting: no responders.
			// So that case waits, and says what to check in its log.)
			return fmt.Errorf("jetstream: %w", err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for JetStream: %w (last error: %w)", ctx.Err(), err)
		}
		if time.Since(lastLog) >= 10*time.Second {
			log.Warn("JetStream not available yet; waiting (a cluster needs a majority of its nodes, a new one all of them; is JetStream enabled on the servers?)", "err", err)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for JetStream: %w (last error: %w)", ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// redact hides passwords and tokens given inside server URLs, for logs and
// errors.
func redact(servers []string) string {
	out := make([]string, len(servers))
	for i, s := range servers {
		u, err := url.Parse(s)
		if err != nil || u.User == nil {
			out[i] = s
			continue
		}
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		} else {
			u.User = url.User("xxxxx") // a bare token
		}
		out[i] = u.String()
	}
	return strings.Join(out, ",")
}
