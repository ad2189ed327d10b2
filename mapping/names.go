// Package mapping is the pure translation between LMQ and JetStream: queue names
// to stream, consumer and subject names, LMQ properties to their JSON text and
// effective values, and message metadata to NATS headers. It does no I/O.
//
// Queue names are arbitrary UTF-8 strings, but stream names are file names on
// disk (possibly on a case-insensitive file system) and may not contain
// ". * > / \" or whitespace. A name is therefore encoded as lowercase base32hex
// without padding (alphabet [0-9a-v], case-free and reversible). Names too long
// for that (the stream name may be at most 255 bytes) are encoded as "_" plus a
// base32hex SHA-256; their original name is kept in the stream's metadata.
package mapping

import (
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxQueueNameLen is the longest queue name accepted, in bytes.
const MaxQueueNameLen = 255

const (
	// StreamPrefix starts every queue's stream name.
	StreamPrefix = "LMQ_"
	// ConsumerName is the durable pull consumer every queue stream has.
	ConsumerName = "lmq"
	// SubjectPrefix starts every subject the gateway uses for queues.
	SubjectPrefix = "lmq"
	// MetaQueueName is the StreamConfig.Metadata key holding the queue name.
	MetaQueueName = "lmq.name"
	// hashMark starts the encoding of names too long to encode directly; it is
	// outside the base32hex alphabet so the two forms never collide.
	hashMark = "_"
	// maxDirectEnc is the longest direct encoding that still fits a stream name.
	maxDirectEnc = 255 - len(StreamPrefix)
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

// EncodeName returns the case-free token that stands for a queue name in stream
// names and subjects.
func EncodeName(name string) string {
	enc := b32.EncodeToString([]byte(name))
	if len(enc) <= maxDirectEnc {
		return enc
	}
	sum := sha256.Sum256([]byte(name))
	return hashMark + b32.EncodeToString(sum[:])
}

// DecodeName reverses EncodeName. ok is false for hashed (long) names, whose
// original lives only in the stream metadata, and for tokens that are not an
// encoding at all.
func DecodeName(enc string) (name string, ok bool) {
	if enc == "" || strings.HasPrefix(enc, hashMark) {
		return "", false
	}
	b, err := b32.DecodeString(enc)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// StreamName is the JetStream stream holding the queue.
func StreamName(queue string) string { return StreamPrefix + EncodeName(queue) }

// QueueSubject is the subject of the queue's deliverable messages.
func QueueSubject(queue string) string { return SubjectPrefix + ".q." + EncodeName(queue) }

// PartSubject is the subject of an accumulating queue's parts that wait for
// their window to close; the queue's consumer does not see it.
func PartSubject(queue string) string { return SubjectPrefix + ".a." + EncodeName(queue) }

// ScheduleSubject is the subject of one delayed message's schedule (id
// unique per message: JetStream keeps one schedule per subject).
func ScheduleSubject(queue, id string) string {
	return SubjectPrefix + ".s." + EncodeName(queue) + "." + id
}

// DeadSubject is the subject of the queue's dead letters.
func DeadSubject(queue string) string { return SubjectPrefix + ".d." + EncodeName(queue) }

// StreamSubjects are all subjects a queue's stream holds.
func StreamSubjects(queue string) []string {
	return []string{QueueSubject(queue), PartSubject(queue), SubjectPrefix + ".s." + EncodeName(queue) + ".*", DeadSubject(queue)}
}

// QueueFromStream returns the encoded token of a stream name, or ok=false when the
// stream is not one of ours.
func QueueFromStream(stream string) (enc string, ok bool) {
	if !strings.HasPrefix(stream, StreamPrefix) || len(stream) == len(StreamPrefix) {
		return "", false
	}
	return stream[len(StreamPrefix):], true
}

// EncFromSubject returns the encoded queue token of a subject lmq.<kind>.<enc>.
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
