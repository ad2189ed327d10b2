// Package gateway is the protocol-neutral core of lmq-gateway: push, pull,
// reply, properties, the queue registry, deliveries and stats, on JetStream.
// Both front ends (HTTP and MessagePack-RPC) call it; it knows neither.
package gateway

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Config configures a Gateway.
type Config struct {
	// Replicas of each queue's stream (1 on a single node).
	Replicas int
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
}

// Gateway is the core. Create it with New; it is safe for concurrent use.
type Gateway struct {
	nc  *nats.Conn
	cfg Config
	log *slog.Logger
}

type delivery struct{}

var errTODO = errors.New("not implemented yet")

// New connects the core to JetStream over nc.
func New(ctx context.Context, nc *nats.Conn, cfg Config) (*Gateway, error) {
	return nil, errTODO
}

// Close stops the core: waiting pulls answer empty, in-flight deliveries stay
// pending in JetStream (their timeout brings them back).
func (g *Gateway) Close() {}

// Push stores msg in queue, creating the queue if needed. It returns once
// JetStream has the message.
func (g *Gateway) Push(ctx context.Context, queue string, msg Message) (AccumState, error) {
	return "", errTODO
}

// PushAll pushes msg to every existing queue whose name matches re; the result
// maps each queue to its accumulation answer (empty when none matched).
func (g *Gateway) PushAll(ctx context.Context, re *regexp.Regexp, msg Message) (map[string]AccumState, error) {
	return nil, errTODO
}

// Pull hands out the queue's next available message, creating the queue if
// needed. wait < 0 waits until a message comes or ctx ends; wait == 0 does not
// wait. It returns (nil, nil) when no message came in time.
func (g *Gateway) Pull(ctx context.Context, queue string, wait time.Duration) (*Delivery, error) {
	return nil, errTODO
}

// PullAny is Pull over every queue whose name matches re, including queues
// created while it waits.
func (g *Gateway) PullAny(ctx context.Context, re *regexp.Regexp, wait time.Duration) (*Delivery, error) {
	return nil, errTODO
}

// Abandon gives back a delivery the front end could not hand to its client (the
// client went away): the message is available again at once and the delivery
// does not count as a retry.
func (g *Gateway) Abandon(ctx context.Context, d *Delivery) {}

// Reply applies a client's ack, nack or ext to the delivery id of queue.
// Unknown, superseded or expired ids give ErrNotFound.
func (g *Gateway) Reply(ctx context.Context, queue, id string, kind ReplyKind) error {
	return errTODO
}

// DeleteQueue drops the queue and all its messages; ErrNotFound if it does not exist.
func (g *Gateway) DeleteQueue(ctx context.Context, queue string) error {
	return errTODO
}

// QueueProps returns the queue's effective properties without creating it.
func (g *Gateway) QueueProps(ctx context.Context, queue string) (mapping.Effective, error) {
	return mapping.Effective{}, errTODO
}

// UpdateProps merges patch into the queue's own properties, creating the queue.
func (g *Gateway) UpdateProps(ctx context.Context, queue string, patch mapping.Props) error {
	return errTODO
}

// ResetProps drops the queue's own properties (back to the defaults).
func (g *Gateway) ResetProps(ctx context.Context, queue string) error {
	return errTODO
}

// DefaultProps returns the default-properties list.
func (g *Gateway) DefaultProps(ctx context.Context) (mapping.DefaultList, error) {
	return nil, errTODO
}

// SetDefaultProps replaces the default-properties list (nil clears it).
func (g *Gateway) SetDefaultProps(ctx context.Context, list mapping.DefaultList) error {
	return errTODO
}
