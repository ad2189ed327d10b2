package store

import (
	"strconv"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// The consumer pull wire: where the store speaks JetStream's wire protocol
// itself (here, and the PubAck of a stored message in publish.go, read by
// jsapi.ParsePubAck); everything
// else goes through nats.go's jetstream package, and every subject comes
// from internal/jsapi.
//
// The no_wait pull request: the core's dispatcher keeps exactly one no_wait
// request per queue in flight, batch-sized to its waiting clients, and never
// leaves a request standing in JetStream. jetstream.Consumer.Fetch with
// FetchNoWait would do one request, but it subscribes a fresh inbox per call
// and blocks a goroutine until it ends; the dispatcher instead sends the
// request from under its lock and takes the answers of every queue's
// requests on one subscription, telling requests apart by their reply
// subject and messages by their stream subject. So the store gives it the
// request's subject and body, and reads the status answers, and the
// dispatcher sends and receives.

// PullSubject is the subject of pull requests to the consumer of queue's
// priority level p (0: the queue's own), under the store's JetStream API
// prefix (jsapi.Prefix: the default, a domain's, or an explicit one).
func (s *Store) PullSubject(queue string, p int) string {
	consumer := mapping.ConsumerName(queue)
	if p > 0 {
		consumer = mapping.PriorityConsumerName(queue, p)
	}
	return jsapi.MsgNextSubject(s.js, mapping.StreamName(queue), consumer)
}

// A pull request's body is the JSON of JetStream's next-message request
// (JetStream's JSApiConsumerGetNextRequest): {"batch":N,"no_wait":true}
// plus "expires" (nanoseconds, how long the server holds the request) when
// the request may wait a moment. EncodePullRequest writes it by hand: one
// goes out per dispatcher round trip, and encoding/json's reflection cost
// more than the rest of the request.

// EncodePullRequest is the no_wait request for batch messages. With settle > 0
// the server waits up to settle for the first message (a bare no_wait request
// is refused at once when the consumer has not yet counted a message that was
// just stored) and still answers as soon as it has some.
func EncodePullRequest(batch int, settle time.Duration) []byte {
	b := make([]byte, 0, 64)
	b = append(b, `{"batch":`...)
	b = strconv.AppendInt(b, int64(batch), 10)
	b = append(b, `,"no_wait":true`...)
	if settle > 0 {
		b = append(b, `,"expires":`...)
		b = strconv.AppendInt(b, int64(settle), 10)
	}
	return append(b, '}')
}

// PullStatus is what a status message answering a pull request means to the
// dispatcher.
type PullStatus int

const (
	PullIgnore     PullStatus = iota // not an answer (100: heartbeat, flow control)
	PullEmpty                        // the request ended: nothing (more) for it
	PullBusy                         // refused before waiting: other requests hold the messages
	PullRefused                      // refused for another reason (leader election, …)
	PullNoConsumer                   // 503 no responders: the consumer does not exist (or has no leader yet)
)

// ClassifyPullStatus reads the status answer of a pull request (a message with
// a Status header and no body).
//
// 408 means two things. "Request Timeout" (and "Interest Expired") end a
// request that ran its course: the server reports the batch and bytes the
// request had left in Nats-Pending-Messages and Nats-Pending-Bytes (nats.go's
// pull reads them the same way). "Requests Pending" refuses a no_wait request
// at once because the messages the consumer has are already promised to
// other requests (other gateways'), and carries no such headers. So the
// headers tell the two apart, not the description's text.
func ClassifyPullStatus(m *bus.Msg) PullStatus {
	switch m.Header.Get("Status") {
	case "100":
		return PullIgnore
	case "404":
		return PullEmpty
	case "503":
		return PullNoConsumer
	case "408":
		if m.Header.Get("Nats-Pending-Messages") != "" {
			return PullEmpty
		}
		return PullBusy
	}
	return PullRefused
}
