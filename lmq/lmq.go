// Package lmq embeds the whole lmq-gateway queue in a Go program: an
// embedded NATS JetStream server storing the queues in a directory of the
// program's, and the gateway's core, used in-process without HTTP or
// MessagePack-RPC. A producer and a consumer in the same program share a
// *Queues; a consumer blocked in Pull sleeps (no polling, no CPU) until a
// message arrives or its context ends.
//
// The semantics are those of the LMQ API served by the lmq-gateway daemon
// (docs/api.md): queues are created by their first push or pull; a pulled
// message is a Delivery that the consumer acks (done), nacks (back to the
// queue at once, counting a retry) or exts (restarts its timeout); one not
// answered within the queue's timeout property returns to the queue; after
// retry+1 deliveries it is dropped, or kept as a dead letter. Properties
// (timeout, retry, accum, ttl, dead_letter; release_on_disconnect concerns
// the RPC front end) are set per queue or by a default list, exactly as over
// HTTP.
//
// The same process may serve LMQ's HTTP and MessagePack-RPC front ends on
// listeners of its own (Options.HTTP, Options.RPC), so that other programs
// reach the queues it uses in-process. Open starts what the daemon starts
// (package server) and Close stops it in the daemon's order, which loses
// nothing: deliveries not answered by then are given back to their queues.
//
// One directory is used by one process at a time (Open fails with the
// holder's pid otherwise); the daemon can later be started on it, and the
// other way round.
package lmq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/server"
)

// Options configure Open. Only DataDir is required.
type Options struct {
	// DataDir is where the queues are stored (the embedded JetStream's
	// directory). Required.
	DataDir string
	// Logger receives the log lines of the queue and of NATS; nil discards
	// them.
	Logger *slog.Logger
	// MaxMessageSize bounds a message body (default 256 MiB, the daemon's
	// --max-body). Bodies beyond a NATS message go to the Object Store.
	MaxMessageSize int64
	// HTTP, when set, serves LMQ's HTTP API on this listener, and RPC
	// MessagePack-RPC on that one; Close closes them. Neither has
	// authentication: use loopback, or see Config.
	HTTP, RPC net.Listener
	// NATSListen makes the embedded NATS server listen for NATS clients
	// (the nats CLI, other programs) on this address, with a generated user
	// and password written to the data directory; "" (the default) keeps it
	// in-process.
	NATSListen string
	// Config, when set, adjusts the daemon's configuration built from the
	// fields above before the start (limits, TLS, authentication, an
	// existing NATS deployment instead of the embedded server: see
	// server.Config and lmq-gateway --help).
	Config func(*server.Config)
}

// Queues is an open queue store. Its methods are safe for concurrent use.
type Queues struct {
	srv  *server.Server
	core *gateway.Gateway

	cancel    context.CancelFunc
	served    chan struct{}
	closed    atomic.Bool // Close began: calls answer ErrClosed
	closeOnce sync.Once
	closeErr  error
}

// Errors, to test with errors.Is.
var (
	// ErrNotFound: an unknown queue (where it must exist), or a delivery
	// that is unknown, already answered or past its timeout.
	ErrNotFound = gateway.ErrNotFound
	// ErrInvalid: an invalid queue name, property or argument.
	ErrInvalid = gateway.ErrInvalid
	// ErrTooLarge: a body beyond Options.MaxMessageSize.
	ErrTooLarge = gateway.ErrTooLarge
	// ErrUnknown: JetStream did not answer in time; the push or ack may or
	// may not have taken effect (a push retried with the same
	// PushOptions.IdempotencyKey is stored once).
	ErrUnknown = gateway.ErrUnknown
	// ErrClosed: the Queues is closing or closed.
	ErrClosed = errors.New("lmq: closed")
)

// closeTimeout bounds Close's drain of the front ends' requests in flight.
const closeTimeout = 30 * time.Second

// Open starts the embedded NATS server on opts.DataDir, the queue's core
// and, when asked, the front ends. ctx bounds the start only.
func Open(ctx context.Context, opts Options) (*Queues, error) {
	if opts.DataDir == "" {
		return nil, fmt.Errorf("%w: Options.DataDir is required", ErrInvalid)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.MaxMessageSize <= 0 {
		opts.MaxMessageSize = 256 << 20
	}
	// The daemon's defaults (lmq-gateway --help) where they matter here.
	cfg := server.Config{
		HTTPListener:      opts.HTTP,
		RPCListener:       opts.RPC,
		MaxBody:           opts.MaxMessageSize,
		MaxBuffered:       32 << 20,
		MaxHeaderBytes:    64 << 10,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		Embedded: embedded.Options{
			DataDir:    opts.DataDir,
			Listen:     opts.NATSListen,
			MaxPayload: 8 << 20,
		},
		Replicas: 1,
		Version:  "embedded",
		Logger:   log,
	}
	if opts.Config != nil {
		opts.Config(&cfg)
	}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	q := &Queues{srv: srv, core: srv.Core(), cancel: cancel, served: make(chan struct{})}
	go func() {
		defer close(q.served)
		// Serve runs the front ends (if any) and the statistics until
		// Close; a listener failing is logged, the in-process API goes on.
		if err := srv.Serve(sctx); err != nil {
			log.Error("lmq: front end stopped", "err", err)
		}
	}()
	return q, nil
}

// Close stops the front ends (draining their requests for up to 30 s),
// ends waiting pulls (they return ErrClosed), gives back the deliveries
// nobody answered, and stops NATS. Later calls return the first's result.
func (q *Queues) Close() error {
	q.closeOnce.Do(func() {
		q.closed.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		q.closeErr = q.srv.Shutdown(ctx)
		q.cancel()
		<-q.served
	})
	return q.closeErr
}

// HTTPAddr is the address of Options.HTTP, nil without it.
func (q *Queues) HTTPAddr() net.Addr { return q.srv.HTTPAddr() }

// RPCAddr is the address of Options.RPC, nil without it.
func (q *Queues) RPCAddr() net.Addr { return q.srv.RPCAddr() }

// Gateway is the core under the API, for what this package does not wrap
// (batches, push to all matching queues, dead letters, the queue
// inventory). It is valid until Close.
func (q *Queues) Gateway() *gateway.Gateway { return q.core }

// PushOptions are a push's options; the zero value is a plain LMQ push.
type PushOptions struct {
	// ContentType is returned with the message ("" reads back as
	// application/octet-stream, as over HTTP).
	ContentType string
	// Delay keeps the message invisible for this long.
	Delay time.Duration
	// TTL overrides the queue's ttl property: the message expires this long
	// after the push if nobody pulled it.
	TTL time.Duration
	// IdempotencyKey: a push retried with the same key within five minutes
	// is stored once.
	IdempotencyKey string
	// Priority, when set, is the message's priority, 0 to 9 (higher served
	// first); nil: the queue's priority property.
	Priority *int
	// Group, when set, puts the message in that ordered group of the queue:
	// the group's messages are handed out one at a time, in push order
	// (at most 256 bytes; not with Delay or Priority).
	Group string
}

// Push stores body in queue, creating the queue if needed, and returns once
// it is stored (on an accumulating queue: once it joined the open window).
// opts may be nil.
func (q *Queues) Push(ctx context.Context, queue string, body []byte, opts *PushOptions) error {
	if q.closed.Load() {
		return ErrClosed
	}
	var o PushOptions
	if opts != nil {
		o = *opts
	}
	msg := gateway.Message{ContentType: o.ContentType, Body: body}
	_, err := q.core.Messages().PushWith(ctx, queue, msg, gateway.PushOptions{
		Delay: o.Delay, TTL: o.TTL, IdempotencyKey: o.IdempotencyKey,
		Priority: o.Priority, Group: o.Group,
	})
	return err
}

// Pull waits until queue (created if needed) has a message for this caller,
// or ctx ends (it then returns ctx.Err()). A message claimed at the moment
// ctx ends is given back to the queue, not lost, and does not count as a
// retry. To take a message only if one is there, give ctx a short deadline.
func (q *Queues) Pull(ctx context.Context, queue string) (*Delivery, error) {
	if q.closed.Load() {
		return nil, ErrClosed
	}
	d, err := q.core.Messages().Pull(ctx, queue, -1)
	return q.delivery(ctx, d, err)
}

// PullAny is Pull over every queue whose name matches re, including queues
// created while it waits; it creates none.
func (q *Queues) PullAny(ctx context.Context, re *regexp.Regexp) (*Delivery, error) {
	if q.closed.Load() {
		return nil, ErrClosed
	}
	d, err := q.core.Messages().PullAny(ctx, re, -1, nil)
	return q.delivery(ctx, d, err)
}

func (q *Queues) delivery(ctx context.Context, d *gateway.Delivery, err error) (*Delivery, error) {
	if err != nil {
		return nil, err
	}
	if d == nil {
		// The wait ended without a message: ctx, or Close.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, ErrClosed
	}
	out := &Delivery{
		Queue:          d.Queue,
		ID:             d.ID,
		RetryRemaining: d.RetryRemaining, Priority: d.Priority, Group: d.Group,
		q: q,
	}
	if d.Compound {
		out.Parts = make([]Message, len(d.Parts))
		for i, p := range d.Parts {
			out.Parts[i] = messageOf(p)
		}
	} else {
		out.Message = messageOf(d.Message)
	}
	return out, nil
}

func messageOf(m gateway.Message) Message {
	ct := m.ContentType
	if ct == "" {
		ct = mapping.DefaultContentType
	}
	return Message{Body: m.Body, ContentType: ct}
}

// Message is a pushed message as delivered.
type Message struct {
	Body        []byte
	ContentType string
}

// Delivery is one handing-out of a message: answer it with Ack, Nack or
// Ext before the queue's timeout.
type Delivery struct {
	// Queue the message came from.
	Queue string
	// ID is the delivery id, as HTTP's x-lmq-message-id; Reply takes it.
	ID string
	// RetryRemaining is how many more deliveries the message may have
	// after this one (HTTP's x-lmq-retry-remaining).
	RetryRemaining int
	// Priority is the message's priority (HTTP's x-lmq-priority; 0 when
	// none) and Group its ordered group (x-lmq-group; "" when none).
	Priority int
	Group    string
	// Message is the message; Parts are the messages of an accumulated
	// (compound) delivery instead, in push order.
	Message Message
	Parts   []Message

	q *Queues
}

// Compound reports whether the delivery holds accumulated messages (Parts).
func (d *Delivery) Compound() bool { return d.Parts != nil }

// Ack ends the delivery: the message is removed. ErrNotFound when the
// delivery was already answered or its timeout passed.
func (d *Delivery) Ack(ctx context.Context) error { return d.q.Reply(ctx, d.Queue, d.ID, Ack) }

// Nack gives the message back to the queue at once; it counts as a retry.
func (d *Delivery) Nack(ctx context.Context) error { return d.q.Reply(ctx, d.Queue, d.ID, Nack) }

// Ext restarts the delivery's timeout.
func (d *Delivery) Ext(ctx context.Context) error { return d.q.Reply(ctx, d.Queue, d.ID, Ext) }

// ReplyKind is an answer to a delivery.
type ReplyKind = gateway.ReplyKind

// Answers to a delivery: ack (done), nack (release), ext (retain).
const (
	Ack  = gateway.Ack
	Nack = gateway.Nack
	Ext  = gateway.Ext
)

// Reply answers the delivery id of queue, also one handed out by another
// process or front end (as HTTP's POST /messages/{queue}/{id}?reply=).
func (q *Queues) Reply(ctx context.Context, queue, id string, kind ReplyKind) error {
	if q.closed.Load() {
		return ErrClosed
	}
	return q.core.Messages().Reply(ctx, queue, id, kind)
}

// Props are queue properties; nil fields are not set. ParseProps reads
// them from their JSON text ({"timeout": 60, "retry": 5}).
type Props = mapping.Props

// Effective are the properties in force for a queue.
type Effective = mapping.Effective

// ParseProps parses properties from JSON, as HTTP's PATCH /properties/{queue}.
func ParseProps(json string) (Props, error) { return mapping.ParseProps([]byte(json)) }

// Props returns the properties in force for queue, without creating it.
func (q *Queues) Props(ctx context.Context, queue string) (Effective, error) {
	return q.core.Queues().QueueProps(ctx, queue)
}

// SetProps sets the properties of patch on queue (creating it), keeping the
// others.
func (q *Queues) SetProps(ctx context.Context, queue string, patch Props) error {
	return q.core.Queues().UpdateProps(ctx, queue, patch)
}

// ResetProps removes the queue's own properties: the default list's and
// the system defaults apply again.
func (q *Queues) ResetProps(ctx context.Context, queue string) error {
	return q.core.Queues().ResetProps(ctx, queue)
}

// SetDefaultProps replaces the default-properties list, given as its JSON
// text [[REGEXP, PROPS], ...] (HTTP's PUT /properties).
func (q *Queues) SetDefaultProps(ctx context.Context, json string) error {
	list, err := mapping.ParseDefaultList([]byte(json))
	if err != nil {
		return err
	}
	return q.core.Queues().SetDefaultProps(ctx, list)
}

// DeleteQueue deletes queue and its messages.
func (q *Queues) DeleteQueue(ctx context.Context, queue string) error {
	return q.core.Queues().DeleteQueue(ctx, queue)
}

// WaitingMessage is one waiting message as Messages lists it; its Seq
// (stream sequence) is the id DeleteMessage takes (gateway.Peeked).
type WaitingMessage = gateway.Peeked

// MaxListed bounds the messages one Messages call lists.
const MaxListed = gateway.MaxPeek

// Messages returns up to n (1 to MaxListed) of queue's waiting messages in
// the order they will be delivered, without taking them, as HTTP's
// GET /queues/{queue}/messages; their bodies (each cut to
// gateway.MaxPeekBody bytes) only with withBody. ErrNotFound for a queue
// that does not exist; ErrInvalid for n out of range.
func (q *Queues) Messages(ctx context.Context, queue string, n int, withBody bool) ([]WaitingMessage, error) {
	if q.closed.Load() {
		return nil, ErrClosed
	}
	return q.core.Inspect().Messages(ctx, queue, n, withBody)
}

// DeleteMessage removes queue's waiting message id (a WaitingMessage's
// Seq), as HTTP's DELETE /queues/{queue}/messages/{id}. ErrNotFound when it
// is gone, in flight (handed out and not answered) or not one of the
// queue's waiting messages.
func (q *Queues) DeleteMessage(ctx context.Context, queue string, id uint64) error {
	if q.closed.Load() {
		return ErrClosed
	}
	return q.core.Inspect().DeleteMessage(ctx, queue, id)
}

// MoveMessage moves queue's waiting message id (a WaitingMessage's Seq) to
// the queue target, made when it does not exist, as HTTP's
// POST /queues/{queue}/messages/{id}/move?to=target (gateway's MoveMessage
// says what the message keeps). ErrNotFound as DeleteMessage; ErrInvalid
// when target is queue or not a valid name.
func (q *Queues) MoveMessage(ctx context.Context, queue string, id uint64, target string) error {
	if q.closed.Load() {
		return ErrClosed
	}
	return q.core.Inspect().MoveMessage(ctx, queue, id, target)
}

// Purge removes every waiting message of queue (every priority, delayed
// ones, parts of open accumulation windows, ordered groups' messages) and
// keeps the queue, its properties and its dead letters (HTTP's DELETE
// /queues/{name}/messages). Deliveries in flight may still be acked and
// are not delivered again. An error wrapping ErrNotFound when the queue
// does not exist.
func (q *Queues) Purge(ctx context.Context, queue string) error {
	if q.closed.Load() {
		return ErrClosed
	}
	return q.core.Queues().Purge(ctx, queue)
}
