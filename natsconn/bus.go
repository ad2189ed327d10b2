package natsconn

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// The daemon's connections as the core takes them: a *bus.Bus, so that
// the daemon (package server) holds no nats.go type. The connection is
// made here, with this package's behaviour; the Bus owns it from then on
// (Bus.Close flushes and closes it).

// Open connects to the deployment o describes (Connect) and returns the
// connection as a Bus.
func Open(ctx context.Context, o Options) (*bus.Bus, error) {
	nc, err := Connect(ctx, o)
	if err != nil {
		return nil, err
	}
	return bus.New(nc), nil
}

// OpenEmbedded connects in-process (or over loopback) to the embedded
// server ns as name, reconnecting forever, and logs the connection's losses
// and returns to log.
func OpenEmbedded(ns *embedded.Server, name string, log *slog.Logger) (*bus.Bus, error) {
	if log == nil {
		log = slog.Default()
	}
	nc, err := ns.Connect(name,
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "url", nc.ConnectedUrl()) }),
	)
	if err != nil {
		return nil, err
	}
	return bus.New(nc), nil
}

// WaitJetStreamOn is WaitJetStream on bus's connection.
func WaitJetStreamOn(ctx context.Context, bus *bus.Bus, domain string, log *slog.Logger) error {
	return WaitJetStream(ctx, bus.NATS(), domain, log)
}
