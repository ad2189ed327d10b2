// Package mapping is the pure translation between LMQ and JetStream: queue names
// to stream, consumer and subject names, LMQ properties to their JSON text and
// effective values, and message metadata to NATS headers. It does no I/O.
//
// Layout (see the gateway package doc for why): queues are subjects, sharded
// over ShardCount WorkQueue streams. A queue's messages live in stream
// ShardStream(Shard(name)) on subject lmq.q.<kk>.<enc>, where <kk> is the
// two-digit shard and <enc> the encoded name; its parts, delays and dead
// letters on lmq.a/s/d.<kk>.<enc>[.<id>] in the same stream, its messages of
// priorities 1..MaxPriority on lmq.p.<kk>.<enc>.<p> (priority.go).
//
// Queue names are arbitrary UTF-8 strings of up to MaxQueueNameLen bytes, but
// subject tokens may not contain ". * >" or whitespace and consumer names
// are file names on disk (possibly on a case-insensitive file system). A name
// is therefore encoded as lowercase base32hex without padding (alphabet
// [0-9a-v], case-free and reversible): that is the token in subjects and keys.
// Consumer names are at most 255 bytes: names whose encoding is longer get a
// consumer named "_" plus a base32hex SHA-256, with the name in its metadata.
package mapping

import (
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxQueueNameLen is the longest queue name accepted, in bytes. LMQ stopped
// at 255 because its names were Erlang atoms; here a name is a subject token
// (1,639 characters encoded), well inside NATS's limits.
const MaxQueueNameLen = 1024

// ShardCount is the number of WorkQueue streams queues are spread over. It is
// fixed: every gateway and every NATS program must agree on where a queue
// lives. 64 was chosen by measurement (docs/benchmarks-history.md, "Many queues: candidate layouts"): fewer
// shards make acks slower (a WorkQueue ack walks the stream's consumers),
// more cost streams without need. A shard stream is created on the first
// push into it.
const ShardCount = 64

const (
	// ShardStreamPrefix starts the name of every shard stream ("LMQS_07").
	// Gateways of the old layout (LegacyStreamPrefix, one stream per queue)
	// do not take these for queues.
	ShardStreamPrefix = "LMQS_"
	// SubjectPrefix starts every subject the gateway uses for queues.
	SubjectPrefix = "lmq"
	// MetaQueueName is the metadata key (of a consumer, or of an old-layout
	// stream) holding the queue name where the name itself is hashed.
	MetaQueueName = "lmq.name"
	// hashMark starts a hashed consumer name; it is outside the base32hex
	// alphabet so the two forms never collide.
	hashMark = "_"
	// maxNameLen is JetStream's limit on stream and consumer names.
	maxNameLen = 255
)

// ErrInvalidName is returned for names that are empty, too long or contain
// control characters.
var ErrInvalidName = errors.New("invalid queue name")

var b32 = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// ValidateQueueName reports whether name may be used as a queue name.
func ValidateQueueName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > MaxQueueNameLen:
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidName, MaxQueueNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: not UTF-8", ErrInvalidName)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: contains control character %U", ErrInvalidName, r)
		}
	}
	return nil
}

// EncodeName returns the case-free, reversible token that stands for a queue
// name in subjects and keys.
func EncodeName(name string) string { return b32.EncodeToString([]byte(name)) }

// DecodeName reverses EncodeName; ok is false for tokens that are not an
// encoding of a valid queue name.
func DecodeName(enc string) (name string, ok bool) {
	if enc == "" || len(enc) > b32.EncodedLen(MaxQueueNameLen) {
		return "", false
	}
	b, err := b32.DecodeString(enc)
	if err != nil || ValidateQueueName(string(b)) != nil {
		return "", false
	}
	return string(b), true
}

// Shard is the shard holding the queue: FNV-1a of the name modulo ShardCount.
func Shard(queue string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(queue))
	return int(h.Sum32() % ShardCount)
}

// shardToken is the shard's subject token: two digits.
func shardToken(k int) string {
	if k < 10 {
		return "0" + strconv.Itoa(k)
	}
	return strconv.Itoa(k)
}

// ShardStream is the name of shard k's stream.
func ShardStream(k int) string { return ShardStreamPrefix + shardToken(k) }

// ShardFromStream returns the shard of a shard stream's name; ok is false
// for any other stream.
func ShardFromStream(stream string) (k int, ok bool) {
	tok, found := strings.CutPrefix(stream, ShardStreamPrefix)
	if !found || len(tok) != 2 {
		return 0, false
	}
	k, err := strconv.Atoi(tok)
	if err != nil || k < 0 || k >= ShardCount || shardToken(k) != tok {
		return 0, false
	}
	return k, true
}

// ShardSubjects are the subjects shard k's stream holds.
func ShardSubjects(k int) []string {
	t := shardToken(k)
	return []string{
		SubjectPrefix + ".q." + t + ".*",
		SubjectPrefix + ".a." + t + ".*",
		SubjectPrefix + ".s." + t + ".*.*",
		SubjectPrefix + ".d." + t + ".*",
		SubjectPrefix + ".p." + t + ".*.*", // priorities 1..MaxPriority
		SubjectPrefix + ".g." + t + ".*.*", // groups' backlogs (groups.go)
		SubjectPrefix + ".h." + t + ".*.*", // groups' heads
	}
}

// ShardQueueWildcard matches the deliverable subjects of every queue of shard k.
func ShardQueueWildcard(k int) string { return SubjectPrefix + ".q." + shardToken(k) + ".*" }

// StreamName is the JetStream stream holding the queue (its shard's).
func StreamName(queue string) string { return ShardStream(Shard(queue)) }

func subject(kind, queue string) string {
	return SubjectPrefix + "." + kind + "." + shardToken(Shard(queue)) + "." + EncodeName(queue)
}

// QueueSubject is the subject of the queue's deliverable messages.
func QueueSubject(queue string) string { return subject("q", queue) }

// PartSubject is the subject of an accumulating queue's parts that wait for
// their window to close; the queue's consumer does not see it.
func PartSubject(queue string) string { return subject("a", queue) }

// ScheduleSubject is the subject of one delayed message's schedule (id
// unique per message: JetStream keeps one schedule per subject).
func ScheduleSubject(queue, id string) string { return subject("s", queue) + "." + id }

// DeadSubject is the subject of the queue's dead letters.
func DeadSubject(queue string) string { return subject("d", queue) }

// QueueSubjects are the subjects of all the queue's messages, for purging it:
// deliverable, parts and dead letters (lmq.*.<kk>.<enc>), delays,
// priorities and groups.
func QueueSubjects(queue string) []string {
	t := shardToken(Shard(queue)) + "." + EncodeName(queue)
	return []string{SubjectPrefix + ".*." + t, SubjectPrefix + ".s." + t + ".*", SubjectPrefix + ".p." + t + ".*",
		SubjectPrefix + ".g." + t + ".*", SubjectPrefix + ".h." + t + ".*"}
}

// WaitingSubjects are the subjects of the queue's messages not yet handed
// out, for purging them (the queue, its properties and its dead letters
// stay): deliverable, parts, delays, priorities and groups. (Waiting in a
// pull's sense leaves delays and parts out: waiting.go.)
func WaitingSubjects(queue string) []string {
	t := shardToken(Shard(queue)) + "." + EncodeName(queue)
	return []string{SubjectPrefix + ".q." + t, SubjectPrefix + ".a." + t, SubjectPrefix + ".s." + t + ".*",
		SubjectPrefix + ".p." + t + ".*", SubjectPrefix + ".g." + t + ".*", SubjectPrefix + ".h." + t + ".*"}
}

// ParseSubject splits a queue subject lmq.<kind>.<kk>.<enc>[.<id>] into its
// kind ("q", "a", "s", "d", or "p" for lmq.p.<kk>.<enc>.<p>, see
// SubjectPriority) and the encoded queue name.
func ParseSubject(subject string) (kind, enc string, ok bool) {
	rest, found := strings.CutPrefix(subject, SubjectPrefix+".")
	if !found {
		return "", "", false
	}
	kind, rest, found = strings.Cut(rest, ".")
	if !found || len(rest) < 4 || rest[2] != '.' {
		return "", "", false
	}
	enc = rest[3:]
	if kind == "s" || kind == "p" || kind == "g" || kind == "h" {
		enc, _, found = strings.Cut(enc, ".")
		if !found {
			return "", "", false
		}
	} else if strings.Contains(enc, ".") {
		return "", "", false
	}
	if enc == "" {
		return "", "", false
	}
	return kind, enc, true
}

// ConsumerName is the durable pull consumer serving the queue: its encoded
// name, or "_" plus a hash where that is longer than JetStream allows.
func ConsumerName(queue string) string { return encodeWithin(queue, maxNameLen) }

// encodeWithin is EncodeName(name) when that is at most max bytes long, else
// "_" plus the base32hex SHA-256 of name.
func encodeWithin(name string, max int) string {
	enc := EncodeName(name)
	if len(enc) <= max {
		return enc
	}
	sum := sha256.Sum256([]byte(name))
	return hashMark + b32.EncodeToString(sum[:])
}

// EncFromSubject returns the encoded queue token of a subject lmq.<kind>.<enc>
// (the notification subjects).
func EncFromSubject(subject string) (kind, enc string, ok bool) {
	rest, found := strings.CutPrefix(subject, SubjectPrefix+".")
	if !found {
		return "", "", false
	}
	kind, enc, found = strings.Cut(rest, ".")
	if !found || enc == "" || strings.Contains(enc, ".") {
		return "", "", false
	}
	return kind, enc, true
}

// ConsumerInactive is the InactiveThreshold of a queue's consumer: JetStream
// removes a consumer nobody pulled from for this long (counted from its last
// pending ack's deadline, so never under a delivery in flight), and the next
// pull creates it again. Idle queues thus cost no consumer.
const ConsumerInactive = 5 * time.Minute
