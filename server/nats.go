package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/natsconn"
	"github.com/lmq-gateway/lmq-gateway/ops"
)

// connectNATS connects to Config.NATSURL, or starts the embedded server and
// connects to it in-process.
func (s *Server) connectNATS(ctx context.Context) (*nats.Conn, *embedded.Server, error) {
	log := s.log
	if s.cfg.NATSURL != "" {
		o := s.cfg.NATS
		o.URLs, o.Name, o.Logger = s.cfg.NATSURL, "lmq-gateway", log
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if s.cfg.NATSWait > 0 {
			cctx, cancel = context.WithTimeout(ctx, s.cfg.NATSWait)
		}
		nc, err := natsconn.Connect(cctx, o)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				return nil, nil, fmt.Errorf("--nats-url: no server answered within --nats-wait %v: %w", s.cfg.NATSWait, err)
			}
			return nil, nil, err
		}
		return nc, nil, nil
	}
	eo := s.cfg.Embedded
	eo.Logger = log
	ns, err := embedded.Start(eo)
	if err != nil {
		return nil, nil, err
	}
	logNATSAuth(log, ns)
	nc, err := ns.Connect("lmq-gateway",
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "url", nc.ConnectedUrl()) }),
	)
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
func (s *Server) closeNATS() {
	if err := s.nc.FlushTimeout(5 * time.Second); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		s.log.Warn("nats flush", "err", err)
	}
	s.nc.Close()
	if s.ns != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s.ns.Shutdown(ctx)
		cancel()
	}
}

// natsWhere is the start line's "nats" field.
func (s *Server) natsWhere() string {
	if s.ns == nil {
		return s.cfg.NATSURL
	}
	if u := s.ns.ClientURL(); u != "" {
		return "embedded " + u
	}
	return "embedded (in-process)"
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
		jsz, err := s.Jsz(&natsserver.JSzOptions{})
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
