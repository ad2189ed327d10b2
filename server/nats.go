package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/natsconn"
	"github.com/lmq-gateway/lmq-gateway/ops"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// connectNATS connects to Config.NATSURL, or starts the embedded server and
// connects to it in-process.
func (s *Server) connectNATS(ctx context.Context) (*bus.Bus, *embedded.Server, error) {
	log := s.log
	if s.cfg.NATSURL != "" {
		o := s.cfg.NATS
		o.URLs, o.Name, o.Logger = s.cfg.NATSURL, "lmq-gateway", log
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if s.cfg.NATSWait > 0 {
			cctx, cancel = context.WithTimeout(ctx, s.cfg.NATSWait)
		}
		bus, err := natsconn.Open(cctx, o)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				return nil, nil, fmt.Errorf("--nats-url: no server answered within --nats-wait %v: %w", s.cfg.NATSWait, err)
			}
			return nil, nil, err
		}
		return bus, nil, nil
	}
	eo := s.cfg.Embedded
	eo.Logger = log
	ns := embedded.New(eo)
	if err := ns.Start(ctx); err != nil {
		return nil, nil, err
	}
	logNATSAuth(log, ns)
	bus, err := natsconn.OpenEmbedded(ns, "lmq-gateway", log)
	if err != nil {
		ns.Stop()
		return nil, nil, err
	}
	return bus, ns, nil
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
	if err := s.bus.Close(5 * time.Second); err != nil {
		s.log.Warn("nats flush", "err", err)
	}
	if s.ns != nil {
		s.ns.Stop() // bounded by embedded.Options.StopTimeout (10 s)
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
// JetStream cluster as it sees it (clusterNodes); with an external
// deployment, the server this gateway is connected to (package ops adds the
// servers holding queues).
func nodesOf(bus *bus.Bus, ns *embedded.Server) func(context.Context) (ops.Nodes, error) {
	if ns == nil {
		return func(context.Context) (ops.Nodes, error) {
			var n ops.Nodes
			if name := bus.ServerName(); name != "" {
				n.Active, n.All = []string{name}, []string{name}
			}
			return n, nil
		}
	}
	return func(context.Context) (ops.Nodes, error) { return clusterNodes(ns.NATS()) }
}

// clusterNodes lists the servers of s's JetStream cluster (its meta group)
// and those that are up. JetStream's own Offline mark alone comes far too
// late for a server that died without saying so (kill -9, a lost machine):
// it waits for the system account's heartbeats to stop, minutes. So a
// server is shown down when any of these holds:
//
//   - JetStream marks it offline (it announced its shutdown, or those
//     heartbeats stopped);
//   - s has no route to it: a process that dies closes its connections, so
//     a killed server shows down at once;
//   - s has not heard from it for gateway.ReplicaSilence in any Raft group
//     where s would have (lastHeard): a machine or network gone without
//     closing anything, or a frozen process.
func clusterNodes(s *natsserver.Server) (ops.Nodes, error) {
	self := s.Name()
	n := ops.Nodes{Active: []string{self}, All: []string{self}}
	jsz, err := s.Jsz(&natsserver.JSzOptions{})
	if err != nil {
		return ops.Nodes{}, fmt.Errorf("jsz: %w", err)
	}
	m := jsz.Meta
	if m == nil {
		return n, nil // a single server
	}
	rz, err := s.Routez(&natsserver.RoutezOptions{})
	if err != nil {
		return ops.Nodes{}, fmt.Errorf("routez: %w", err)
	}
	routed := make(map[string]bool, len(rz.Routes))
	for _, r := range rz.Routes {
		if r != nil {
			routed[r.RemoteName] = true
		}
	}
	heard := lastHeard(s)
	up := func(name string, offline bool) bool {
		if offline || !routed[name] {
			return false
		}
		ago, known := heard[name]
		return !known || ago <= gateway.ReplicaSilence
	}
	listed := map[string]bool{self: true}
	for _, p := range m.Replicas {
		if p == nil || listed[p.Name] {
			continue
		}
		listed[p.Name] = true
		n.All = append(n.All, p.Name)
		if up(p.Name, p.Offline) {
			n.Active = append(n.Active, p.Name)
		}
	}
	if l := m.Leader; l != "" && !listed[l] {
		// Named as leader but not (yet) a member this server knows.
		n.All = append(n.All, l)
		if up(l, false) {
			n.Active = append(n.Active, l)
		}
	}
	return n, nil
}

// lastHeard returns, per server, how long ago s last heard from it in any
// of its Raft groups (the JetStream meta group, every stream's and
// consumer's) where that is known: where s leads, it hears from every
// member about every second (their answers to its heartbeats), and one it
// has not heard from since it took the lead has been silent at least that
// long; where s follows, it hears from the leader alone (a follower forgets
// when it last heard from the other followers). A server with no such group
// is missing.
// The freshest word counts: one group that went quiet (closed, say) does
// not make a server down that others hear.
func lastHeard(s *natsserver.Server) map[string]time.Duration {
	heard := map[string]time.Duration{}
	rz := s.Raftz(&natsserver.RaftzOptions{})
	if rz == nil {
		return heard
	}
	leader, follower := natsserver.Leader.String(), natsserver.Follower.String()
	for _, groups := range *rz {
		for _, g := range groups {
			if g.State != leader && g.State != follower {
				continue
			}
			for id, p := range g.Peers {
				if p.Name == "" || (g.State == follower && id != g.Leader) {
					continue
				}
				var ago time.Duration
				switch {
				case p.LastSeen != "":
					var err error
					if ago, err = time.ParseDuration(p.LastSeen); err != nil {
						continue
					}
				case g.State == leader && g.LeaderSince != nil:
					// Not heard from at all since s took the lead (it
					// forgot, as a follower, when it last had): a live
					// member answers the first heartbeat, a second later.
					ago = time.Since(*g.LeaderSince)
				default:
					continue
				}
				if was, ok := heard[p.Name]; !ok || ago < was {
					heard[p.Name] = ago
				}
			}
		}
	}
	return heard
}
