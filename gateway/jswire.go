package gateway

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
)

// Where the core speaks JetStream's wire protocol itself (here, and the
// PubAck of a stored message in store/puback.go); everything else goes through
// nats.go's jetstream package.
//
// The no_wait pull request: the dispatcher (dispatcher.go) keeps exactly one
// no_wait request per queue in flight, batch-sized to its waiting clients,
// and never leaves a request standing in JetStream. jetstream.Consumer.Fetch
// with FetchNoWait would do one request, but it subscribes a fresh inbox per
// call and blocks a goroutine until it ends; the dispatcher instead sends the
// request from under its lock and takes the answers of every queue's
// requests on one subscription (pullTable), telling requests apart by their
// reply subject and messages by their stream subject.

// A pull request's body is the JSON of JetStream's next-message request
// (JetStream's JSApiConsumerGetNextRequest): {"batch":N,"no_wait":true}
// plus "expires" (nanoseconds, how long the server holds the request) when
// the request may wait a moment. encodePullRequest writes it by hand: one
// goes out per dispatcher round trip, and encoding/json's reflection cost
// more than the rest of the request.

// nextSubject is the subject of pull requests to stream's consumer, under
// the API prefix of js (jsapi.Prefix: the default, a domain's, or an
// explicit one).
func nextSubject(js jetstream.JetStream, stream, consumer string) string {
	return jsapi.MsgNextSubject(js, stream, consumer)
}

// encodePullRequest is the no_wait request for batch messages. With settle > 0
// the server waits up to settle for the first message (a bare no_wait request
// is refused at once when the consumer has not yet counted a message that was
// just stored) and still answers as soon as it has some.
func encodePullRequest(batch int, settle time.Duration) []byte {
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

// pullStatus is what a status message answering a pull request means to the
// dispatcher.
type pullStatus int

const (
	pullIgnore     pullStatus = iota // not an answer (100: heartbeat, flow control)
	pullEmpty                        // the request ended: nothing (more) for it
	pullBusy                         // refused before waiting: other requests hold the messages
	pullRefused                      // refused for another reason (leader election, …)
	pullNoConsumer                   // 503 no responders: the consumer does not exist (or has no leader yet)
)

// classifyPullStatus reads the status answer of a pull request (a message with
// a Status header and no body).
//
// 408 means two things. "Request Timeout" (and "Interest Expired") end a
// request that ran its course: the server reports the batch and bytes the
// request had left in Nats-Pending-Messages and Nats-Pending-Bytes (nats.go's
// pull reads them the same way). "Requests Pending" refuses a no_wait request
// at once because the messages the consumer has are already promised to
// other requests (other gateways'), and carries no such headers. So the
// headers tell the two apart, not the description's text.
func classifyPullStatus(m *nats.Msg) pullStatus {
	switch m.Header.Get("Status") {
	case "100":
		return pullIgnore
	case "404":
		return pullEmpty
	case "503":
		return pullNoConsumer
	case "408":
		if m.Header.Get("Nats-Pending-Messages") != "" {
			return pullEmpty
		}
		return pullBusy
	}
	return pullRefused
}
