package bus

import (
	"errors"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
)

// Msg is a NATS message as the core sees it: one to store (store.Encode,
// then store.Publish), one pulled from a queue's consumer (its Reply is the
// ack subject: store.Ack, store.Progress), or one received on a
// subscription of the Bus (Respond). The seam's own type, so that no
// nats.go type crosses it; converting to and from nats.go's costs no
// allocation (the fields are shared, not copied).
//
// A Msg is a small value: handlers receive it by value (Bus.Subscribe), so
// that handing one over allocates nothing beyond what NATS allocated.
type Msg struct {
	Subject string
	// Reply is the subject an answer goes to; for a pulled message, the
	// delivery's ack subject (PullMeta reads it).
	Reply  string
	Header Headers
	Data   []byte

	// bus is the connection the message came on (Respond); nil for a
	// message made to be sent.
	bus *Bus
}

// NewMsg returns a message on subject with an empty header, ready for
// headers to be set.
func NewMsg(subject string) *Msg { return &Msg{Subject: subject, Header: Headers{}} }

// ErrNoReply is Respond's error for a message that asks for no answer, or
// was not received on a subscription.
var ErrNoReply = errors.New("message has no reply subject")

// Respond answers a message received on a subscription (its Reply), without
// waiting for anything.
func (m Msg) Respond(data []byte) error {
	if m.Reply == "" || m.bus == nil {
		return ErrNoReply
	}
	return m.bus.nc.Publish(m.Reply, data)
}

// msgOf is the seam's view of a message nats.go received (the fields are
// shared).
func msgOf(nm *nats.Msg, b *Bus) Msg {
	return Msg{Subject: nm.Subject, Reply: nm.Reply, Header: Headers(nm.Header), Data: nm.Data, bus: b}
}

// natsMsg is m as nats.go sends it (package store has its own copy for
// its publishes) (the fields are shared; the result does
// not escape nats.go's send calls, so it stays on the caller's stack).
func natsMsg(m *Msg) nats.Msg {
	return nats.Msg{Subject: m.Subject, Reply: m.Reply, Header: nats.Header(m.Header), Data: m.Data}
}

// Headers are a message's headers: NATS's header map under the seam's name
// (the conversion costs nothing), for the messages of the Bus and the ones
// package store reads back (store.StoredMsg). Get looks a name up as NATS
// does (as given, then canonical).
type Headers map[string][]string

// Get returns the first value of header key, "" when it has none.
func (h Headers) Get(key string) string { return nats.Header(h).Get(key) }

// Set sets header key to the one value v, replacing any (as NATS does:
// the name as given).
func (h Headers) Set(key, v string) { nats.Header(h).Set(key, v) }

// Add appends v to the values of header key.
func (h Headers) Add(key, v string) { nats.Header(h).Add(key, v) }

// Del removes header key.
func (h Headers) Del(key string) { nats.Header(h).Del(key) }

// Values returns every value of header key.
func (h Headers) Values(key string) []string { return nats.Header(h).Values(key) }

// PullMeta is what a pulled message's ack subject (its Reply) says about
// the delivery.
type PullMeta = jsapi.AckFacts

// PullMeta reads the delivery facts of a pulled message from its ack
// subject (jsapi.ParseAck: no allocation, on the dispatcher's hot path);
// false when Reply is not one (the message did not come from a consumer).
func (m *Msg) PullMeta() (PullMeta, bool) { return jsapi.ParseAck(m.Reply) }
