package mapping

// NATS headers the gateway stamps on every message it stores. A program using
// nats.go can publish into a queue with any subset of them (none are required).
const (
	// HdrContentType is the content-type given at push; absent means none given.
	HdrContentType = "Lmq-Content-Type"
	// HdrPushedAt is the push time in Unix nanoseconds (decimal), for retention stats.
	HdrPushedAt = "Lmq-Pushed"
	// HdrRetry is the queue's retry property when the message was pushed.
	HdrRetry = "Lmq-Retry"
	// HdrDelivered counts the deliveries consumed by earlier copies of the message
	// (a released message is re-published at the tail with this header raised).
	HdrDelivered = "Lmq-Delivered"
	// HdrKind is "compound" for accumulated messages; absent means normal.
	HdrKind = "Lmq-Kind"
	// HdrObject names an Object Store object holding the body of a message too
	// large for one NATS message; the message body is then empty.
	HdrObject = "Lmq-Object"
	// HdrKeepPrefix prefixes request headers kept by the preserve-header hook:
	// "Lmq-Keep-User-Agent" holds the push's user-agent.
	HdrKeepPrefix = "Lmq-Keep-"
	// HdrExpires is when the message expires (Unix nanoseconds; ttl).
	HdrExpires = "Lmq-Expires"
	// HdrDeadAt is when a message became a dead letter (RFC 3339).
	HdrDeadAt = "Lmq-Dead-At"
	// HdrWindow identifies the accumulation window a part belongs to.
	HdrWindow = "Lmq-Window"
	// HdrMigrated is stamped on every message `lmq-gateway migrate` stores:
	// the LMQ delivery id it was copied from. LMQ clients never see it (it is
	// not a kept header); NATS programs do.
	HdrMigrated = "Lmq-Migrated"
	// HdrFirstReceived is when the message was first handed out (Unix
	// nanoseconds), stamped on the copy a release stores (SQS's
	// ApproximateFirstReceiveTimestamp). Absent: not handed out before.
	HdrFirstReceived = "Lmq-First-Received"
	// HdrReceives counts the times earlier copies of the message were
	// handed out, whether or not they used a retry (SQS's
	// ApproximateReceiveCount; Lmq-Delivered counts retries used).
	// Absent: Lmq-Delivered.
	HdrReceives = "Lmq-Receives"
)

// KindCompound is the HdrKind value of compound (accumulated) messages.
const KindCompound = "compound"

// ContentTypeMsgpack is the content-type of content pushed over MessagePack-RPC.
const ContentTypeMsgpack = "application/x-msgpack"

// DefaultContentType is reported for messages pushed without a content-type.
const DefaultContentType = "application/octet-stream"
