package mapping

import (
	"fmt"
	"strings"
)

// Names of the NATS resources shared by every queue, for programs that use a
// queue natively with nats.go (see docs/nats.md, "NATS-native access"). The
// gateway core uses the same values.
const (
	// PropsBucket is the KV bucket of queue properties and the default list.
	PropsBucket = "LMQ_PROPS"
	// QueuesBucket is the KV bucket of the queues that exist: key EncodeName
	// (the queue's token), value the queue name. A queue is created by
	// creating its key, deleted by deleting it.
	QueuesBucket = "LMQ_QUEUES"
	// PropsKeyPrefix starts the key of a queue's own properties in PropsBucket
	// ("q.<enc>"); the value is the JSON of Props.
	PropsKeyPrefix = "q."
	// DefaultsKey is the key of the default-properties list in PropsBucket.
	DefaultsKey = "defaults"
	// ObjectBucket is the Object Store bucket of bodies too large for one NATS
	// message; a queued message then carries HdrObject = "<enc>/<uuid>".
	ObjectBucket = "LMQ_OBJ"
	// AccumBucket is the KV bucket of open accumulation windows and their
	// close jobs (package accumulator).
	AccumBucket = "LMQ_ACCUM"
	// MetaBucket is the KV bucket of queue metadata (times, tags, front
	// ends' attributes: gateway.QueueMeta), key MetaKeyPrefix + the queue's
	// token, a JSON record; made on first use.
	MetaBucket = "LMQ_META"
	// MetaKeyPrefix starts the key of a queue's record in MetaBucket.
	MetaKeyPrefix = "q."
	// HealthBucket is the KV bucket of readiness probes, one key per gateway.
	HealthBucket = "LMQ_HEALTH"
	// JournalStream is the stream where `lmq-gateway migrate` keeps its
	// progress, on subjects starting with JournalPrefix. Its name does not
	// start with StreamPrefix, which would make gateways take it for a queue.
	JournalStream = "LMQMIGRATE"
	// JournalPrefix starts the subjects of JournalStream.
	JournalPrefix = SubjectPrefix + ".migrate."
	// NotifyPrefix starts the wake-up subject of a queue (see NotifySubject).
	NotifyPrefix = SubjectPrefix + ".n."
)

// NotifySubject is the queue's wake-up subject: gateways publish on it after
// every push they store, and wake their clients waiting on that queue at once.
// A program publishing into QueueSubject directly may publish an empty message
// here to do the same; without it the waiting clients notice the message at
// their next re-poll (at most about two seconds later).
func NotifySubject(queue string) string { return NotifyPrefix + EncodeName(queue) }

// PropsKey is the key of the queue's own properties in PropsBucket.
func PropsKey(queue string) string { return PropsKeyPrefix + EncodeName(queue) }

// Native lists everything a NATS program needs to use one queue directly.
type Native struct {
	Queue string `json:"queue"`
	// Encoded is the queue's token in subjects and keys (EncodeName).
	Encoded string `json:"encoded"`
	// Shard is the queue's shard (Shard): its stream and subjects name it.
	Shard int `json:"shard"`
	// Stream is the WorkQueue stream holding the queue (its shard's, shared
	// with other queues).
	Stream string `json:"stream"`
	// Subject holds the queue's deliverable messages: publish here to push.
	Subject string `json:"subject"`
	// PartSubject holds parts of open accumulation windows (not deliverable).
	PartSubject string `json:"part_subject"`
	// ScheduleSubjects holds delayed messages' schedules (one subject each).
	ScheduleSubjects string `json:"schedule_subjects"`
	// DeadSubject holds the queue's dead letters (dead_letter property).
	DeadSubject string `json:"dead_subject"`
	// PrioritySubjects holds messages of priorities 1..MaxPriority, one
	// subject per priority (PrioritySubject), served before Subject, each
	// by its consumer PriorityConsumerName.
	PrioritySubjects string `json:"priority_subjects"`
	// Consumer is the durable pull consumer serving Subject: fetch from it to
	// pull. Gateways create it on a queue's first pull and JetStream removes
	// it after ConsumerInactive without use; a program creates it the same
	// way (filter Subject, explicit acks) when it is missing.
	Consumer string `json:"consumer"`
	// HashedConsumer is true when the name was too long for a consumer
	// name: Consumer is then a hash, and its metadata MetaQueueName has the name.
	HashedConsumer bool `json:"hashed_consumer,omitempty"`
	// QueuesBucket and QueuesKey register the queue: a queue exists while
	// its key does.
	QueuesBucket string `json:"queues_bucket"`
	QueuesKey    string `json:"queues_key"`
	// NotifySubject wakes waiting LMQ clients after a native publish.
	NotifySubject string `json:"notify_subject"`
	// PropsBucket and PropsKey locate the queue's own properties.
	PropsBucket string `json:"props_bucket"`
	PropsKey    string `json:"props_key"`
	// ObjectBucket holds large bodies, under ObjectPrefix.
	ObjectBucket string `json:"object_bucket"`
	ObjectPrefix string `json:"object_prefix"`
}

// NativeNames returns the NATS names of a queue.
func NativeNames(queue string) (Native, error) {
	if err := ValidateQueueName(queue); err != nil {
		return Native{}, err
	}
	enc := EncodeName(queue)
	return Native{
		Queue:            queue,
		Encoded:          enc,
		Shard:            Shard(queue),
		Stream:           StreamName(queue),
		Subject:          QueueSubject(queue),
		PartSubject:      PartSubject(queue),
		ScheduleSubjects: ScheduleSubject(queue, "*"),
		DeadSubject:      DeadSubject(queue),
		PrioritySubjects: PriorityWildcard(queue),
		Consumer:         ConsumerName(queue),
		HashedConsumer:   strings.HasPrefix(ConsumerName(queue), hashMark),
		QueuesBucket:     QueuesBucket,
		QueuesKey:        enc,
		NotifySubject:    NotifySubject(queue),
		PropsBucket:      PropsBucket,
		PropsKey:         PropsKey(queue),
		ObjectBucket:     ObjectBucket,
		ObjectPrefix:     enc + "/",
	}, nil
}

// Text renders the names as "key: value" lines, for people and for awk.
func (n Native) Text() string {
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%-15s %s\n", k+":", v) }
	line("queue", fmt.Sprintf("%q", n.Queue))
	line("encoded", n.Encoded)
	line("shard", fmt.Sprint(n.Shard))
	line("stream", n.Stream)
	line("subject", n.Subject)
	line("parts-subject", n.PartSubject)
	line("delay-subjects", n.ScheduleSubjects)
	line("dead-subject", n.DeadSubject)
	line("priority-subjects", n.PrioritySubjects)
	line("consumer", n.Consumer)
	if n.HashedConsumer {
		line("note", "name too long for a consumer name: hashed, name in consumer metadata "+MetaQueueName)
	}
	line("registry", n.QueuesBucket+" "+n.QueuesKey)
	line("notify-subject", n.NotifySubject)
	line("props", n.PropsBucket+" "+n.PropsKey)
	line("objects", n.ObjectBucket+" "+n.ObjectPrefix+"*")
	return b.String()
}
