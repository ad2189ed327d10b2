package mapping

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Ordered message groups (queue control): the messages of one group of a
// queue are handed out one at a time, in push order. A group's messages wait
// on its backlog subject lmq.g.<kk>.<enc>.<genc>, which no consumer reads;
// its current message (the oldest of the backlog) is copied to its head
// subject lmq.h.<kk>.<enc>.<genc>, which the queue's consumer reads beside
// lmq.q.<kk>.<enc>. A head subject holds at most one message: the copy is
// stored with Nats-Expected-Last-Subject-Sequence 0 ("none there"), so of
// any number of gateways trying at once exactly one succeeds. The package doc
// of gateway/groups says why and what it costs.

// MaxGroupLen is the longest group name accepted, in bytes.
const MaxGroupLen = 256

// HdrGroup names the message's group (on the backlog and head copies; a
// delivery shows it as x-lmq-group).
const HdrGroup = "Lmq-Group"

// HdrGroupSeq is, on a head copy, the stream sequence of the backlog
// message it stands for: removed when the head is done.
const HdrGroupSeq = "Lmq-Group-Seq"

// ValidateGroup reports whether g may be used as a group name: 1 to
// MaxGroupLen bytes of UTF-8 without control characters (it travels in a
// NATS header).
func ValidateGroup(g string) error {
	switch {
	case g == "":
		return fmt.Errorf("group: empty")
	case len(g) > MaxGroupLen:
		return fmt.Errorf("group: longer than %d bytes", MaxGroupLen)
	case !utf8.ValidString(g):
		return fmt.Errorf("group: not UTF-8")
	}
	for _, r := range g {
		if unicode.IsControl(r) {
			return fmt.Errorf("group: contains control character %U", r)
		}
	}
	return nil
}

// GroupSubject is the backlog subject of the queue's group g.
func GroupSubject(queue, g string) string { return subject("g", queue) + "." + EncodeName(g) }

// HeadSubject is the head subject of the queue's group g.
func HeadSubject(queue, g string) string { return subject("h", queue) + "." + EncodeName(g) }

// GroupWildcard matches the backlog subjects of every group of the queue.
func GroupWildcard(queue string) string { return subject("g", queue) + ".*" }

// HeadWildcard matches the head subjects of every group of the queue: the
// queue's consumer reads it beside QueueSubject.
func HeadWildcard(queue string) string { return subject("h", queue) + ".*" }

// GroupFromSubject returns the group named by a backlog or head subject's
// last token; ok is false for other subjects.
func GroupFromSubject(subject string) (g string, ok bool) {
	kind, _, ok := ParseSubject(subject)
	if !ok || (kind != "g" && kind != "h") {
		return "", false
	}
	i := len(subject) - 1
	for i >= 0 && subject[i] != '.' {
		i--
	}
	b, err := b32.DecodeString(subject[i+1:])
	if err != nil || ValidateGroup(string(b)) != nil {
		return "", false
	}
	return string(b), true
}

// ShardGroupWildcard matches the backlog subjects of every group of every
// queue of shard k.
func ShardGroupWildcard(k int) string { return SubjectPrefix + ".g." + shardToken(k) + ".*.*" }
