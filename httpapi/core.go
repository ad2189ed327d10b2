package httpapi

import (
	"context"
	"io"
	"regexp"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Core is what the HTTP front end needs of the core, one small interface
// per handle of the core (gateway.Messages, Queues, Inspect): New takes
// gateway.Gateway's handles, the package's tests the fake core's
// (internal/lmqtest/fakecore). Errors are the core's (gateway.ErrNotFound, ErrInvalid,
// ErrUnavailable, ErrUnknown, …), which fail maps onto status codes.
type Core struct {
	Messages Messages
	Queues   Queues
	Inspect  Inspect
}

// CoreOf is the Core of gateway g's handles.
func CoreOf(g *gateway.Gateway) Core {
	return Core{Messages: g.Messages(), Queues: g.Queues(), Inspect: g.Inspect()}
}

// Messages is what the front end pushes, pulls and replies with
// (gateway.Messages).
type Messages interface {
	// LMQ's API (httpapi.go).
	PushStream(ctx context.Context, queue string, msg gateway.Message, body io.Reader, opts gateway.PushOptions) (gateway.AccumState, error)
	// PushAll and PullAny see the queues of scope: the request's token's
	// (auth.ScopeOf).
	PushAll(ctx context.Context, re *regexp.Regexp, msg gateway.Message, scope gateway.Scope) (map[string]gateway.AccumState, error)
	Pull(ctx context.Context, queue string, wait time.Duration) (*gateway.Delivery, error)
	PullAny(ctx context.Context, re *regexp.Regexp, wait time.Duration, scope gateway.Scope) (*gateway.Delivery, error)
	// Abandon gives back a delivery its client did not receive.
	Abandon(ctx context.Context, d *gateway.Delivery)
	Reply(ctx context.Context, queue, id string, kind gateway.ReplyKind) error
	// Beyond LMQ: batches (batch.go).
	PushBatch(ctx context.Context, queue string, msgs []gateway.Message) error
}

// Queues is what the front end manages queues with (gateway.Queues).
type Queues interface {
	DeleteQueue(ctx context.Context, queue string) error
	QueueProps(ctx context.Context, queue string) (mapping.Effective, error)
	UpdateProps(ctx context.Context, queue string, patch mapping.Props) error
	ResetProps(ctx context.Context, queue string) error
	DefaultProps(ctx context.Context) (mapping.DefaultList, error)
	SetDefaultProps(ctx context.Context, list mapping.DefaultList) error
	// Beyond LMQ: the queue inventory (queues.go).
	QueueNames() []string
	// Beyond LMQ: purging a queue's waiting messages (purge.go).
	Purge(ctx context.Context, queue string) error
}

// Inspect is what the front end looks into queues with (gateway.Inspect).
type Inspect interface {
	// QueueStatuses is every queue's view, sorted by name (GET /queues);
	// it sees the queues of scope.
	QueueStatuses(ctx context.Context, scope gateway.Scope) ([]gateway.QueueStatus, error)
	QueueDetail(ctx context.Context, queue string) (gateway.QueueDetail, error)
	// Dead letters (deadletter.go).
	DeadLetterHead(ctx context.Context, queue string) (*gateway.DeadLetter, error)
	RespawnDeadLetters(ctx context.Context, queue string, n int) (int, error)
	DeleteDeadLetters(ctx context.Context, queue string) (uint64, error)
	// A queue's waiting messages by id (messages.go).
	Messages(ctx context.Context, queue string, n int, withBody bool) ([]gateway.Peeked, error)
	DeleteMessage(ctx context.Context, queue string, seq uint64) error
	MoveMessage(ctx context.Context, queue string, seq uint64, target string) error
	// The deliveries in flight (deliveries.go).
	Deliveries(ctx context.Context, queue string) (gateway.DeliveryList, error)
	FindDelivery(ctx context.Context, id string) (gateway.DeliveryInfo, error)
}

var (
	_ Messages = (*gateway.Messages)(nil)
	_ Queues   = (*gateway.Queues)(nil)
	_ Inspect  = (*gateway.Inspect)(nil)
)
