package mapping

import (
	"fmt"
	"strings"
)

// Names of the NATS resources shared by every queue, for programs that use a
// queue natively with nats.go (see the README, "NATS-native access"). The
// gateway core uses the same values.
const (
	// PropsBucket is the KV bucket of queue properties and the default list.
	PropsBucket = "LMQ_PROPS"
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
	// Encoded is the queue's token in names and subjects (EncodeName).
	Encoded string `json:"encoded"`
	// Hashed is true for names too long to encode directly: Encoded is then a
	// hash, and the name itself is only in the stream's metadata (MetaQueueName).
	Hashed bool `json:"hashed,omitempty"`
	// Stream is the queue's WorkQueue stream.
	Stream string `json:"stream"`
	// Subject holds the queue's deliverable messages: publish here to push.
	Subject string `json:"subject"`
	// PartSubject holds parts of open accumulation windows (not deliverable).
	PartSubject string `json:"part_subject"`
	// ScheduleSubjects holds delayed messages' schedules (one subject each).
	ScheduleSubjects string `json:"schedule_subjects"`
	// DeadSubject holds the queue's dead letters (dead_letter property).
	DeadSubject string `json:"dead_subject"`
	// Consumer is the durable pull consumer serving Subject: fetch from it to pull.
	Consumer string `json:"consumer"`
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
		Hashed:           strings.HasPrefix(enc, hashMark),
		Stream:           StreamName(queue),
		Subject:          QueueSubject(queue),
		PartSubject:      PartSubject(queue),
		ScheduleSubjects: ScheduleSubject(queue, "*"),
		DeadSubject:      DeadSubject(queue),
		Consumer:         ConsumerName,
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
	if n.Hashed {
		line("note", "name too long to encode: hashed, kept in stream metadata "+MetaQueueName)
	}
	line("stream", n.Stream)
	line("subject", n.Subject)
	line("parts-subject", n.PartSubject)
	line("delay-subjects", n.ScheduleSubjects)
	line("dead-subject", n.DeadSubject)
	line("consumer", n.Consumer)
	line("notify-subject", n.NotifySubject)
	line("props", n.PropsBucket+" "+n.PropsKey)
	line("objects", n.ObjectBucket+" "+n.ObjectPrefix+"*")
	return b.String()
}
