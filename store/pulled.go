package store

import "github.com/lmq-gateway/lmq-gateway/internal/jsapi"

// PullMeta is what a pulled message's ack subject (its Reply) says about
// the delivery.
type PullMeta = jsapi.AckFacts

// PullMeta reads the delivery facts of a pulled message from its ack
// subject (jsapi.ParseAck: no allocation, on the dispatcher's hot path);
// false when Reply is not one (the message did not come from a consumer).
func (m *Msg) PullMeta() (PullMeta, bool) { return jsapi.ParseAck(m.Reply) }
