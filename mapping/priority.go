package mapping

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// MaxPriority is the highest message priority. Priorities are 0..MaxPriority,
// 0 the default; a higher number is served first, strictly (lower ones wait
// while higher ones are available).
//
// Priority 0 is stored exactly as without priorities (QueueSubject, no
// header), so that queues not using priorities see no change. A message of
// priority p ≥ 1 lives on PrioritySubject(queue, p) in the queue's shard
// stream and carries HdrPriority; each such level has its own consumer
// (PriorityConsumerName), made when it is first pulled from.
const MaxPriority = 9

// HdrPriority is a message's priority (1..MaxPriority); absent means 0.
const HdrPriority = "Lmq-Priority"

// prioMark starts a priority consumer's name, "p<p>_": '_' is outside the
// base32hex alphabet and a hashed ConsumerName starts with it, so these never
// collide with ConsumerName values.
func prioMark(p int) string { return "p" + strconv.Itoa(p) + "_" }

// PrioritySubject is the subject of the queue's deliverable messages of
// priority p: QueueSubject for 0, lmq.p.<kk>.<enc>.<p> otherwise.
func PrioritySubject(queue string, p int) string {
	if p <= 0 {
		return QueueSubject(queue)
	}
	return subject("p", queue) + "." + strconv.Itoa(p)
}

// PriorityWildcard matches the queue's subjects of priorities 1..MaxPriority.
func PriorityWildcard(queue string) string { return subject("p", queue) + ".*" }

// ShardPriorityWildcard matches the priority subjects of every queue of shard k.
func ShardPriorityWildcard(k int) string { return SubjectPrefix + ".p." + shardToken(k) + ".*.*" }

// ShardDeliverableWildcard matches the deliverable subjects of every queue of
// shard k, priorities included: "lmq.*.<kk>.>" also matches parts, delays
// and dead letters, which callers tell apart with ParseSubject.
func ShardDeliverableWildcard(k int) string { return SubjectPrefix + ".*." + shardToken(k) + ".>" }

// PriorityConsumerName is the durable consumer serving the queue's priority p
// (1..MaxPriority): "p<p>_" plus the encoded name, or plus a hash where that
// is longer than JetStream allows.
func PriorityConsumerName(queue string, p int) string {
	enc := EncodeName(queue)
	if len(prioMark(p))+len(enc) <= maxNameLen {
		return prioMark(p) + enc
	}
	sum := sha256.Sum256([]byte(queue))
	return prioMark(p) + hashMark + b32.EncodeToString(sum[:])
}

// SubjectPriority returns the priority of a deliverable subject: 0 for kind
// "q", p for lmq.p.<kk>.<enc>.<p>; ok is false for any other subject.
func SubjectPriority(subject string) (p int, ok bool) {
	kind, _, ok := ParseSubject(subject)
	switch {
	case !ok:
		return 0, false
	case kind == "q":
		return 0, true
	case kind != "p":
		return 0, false
	}
	p, err := strconv.Atoi(subject[strings.LastIndexByte(subject, '.')+1:])
	if err != nil || p < 1 || p > MaxPriority {
		return 0, false
	}
	return p, true
}

// errPriority is the one refusal of a priority, wherever it is given (a
// push option, the priority property, a copy).
var errPriority = fmt.Errorf("priority must be an integer from 0 to %d", MaxPriority)

// CheckPriority reports whether p is a priority, 0 to MaxPriority.
func CheckPriority(p int64) error {
	if p < 0 || p > MaxPriority {
		return errPriority
	}
	return nil
}

// ParsePriority parses a priority given as text (?priority=N).
func ParsePriority(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || strings.TrimSpace(s) != s || strings.HasPrefix(s, "+") {
		return 0, errPriority
	}
	if err := CheckPriority(int64(p)); err != nil {
		return 0, err
	}
	return p, nil
}

// PriorityValue reads a priority given as a decoded MessagePack or JSON
// value: an integer (int64, or uint64 as a MessagePack decoder gives large
// ones) from 0 to MaxPriority; a float, even a whole one, is refused.
func PriorityValue(v any) (int, error) {
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case uint64:
		if x > MaxPriority {
			return 0, errPriority
		}
		n = int64(x)
	default:
		return 0, errPriority
	}
	if err := CheckPriority(n); err != nil {
		return 0, err
	}
	return int(n), nil
}

// toPriority reads the priority property from JSON or MessagePack.
func toPriority(v any) (int, error) {
	return toIntIn(v, 0, MaxPriority, errPriority)
}

// toIntIn reads an integer property from JSON or MessagePack that must lie
// in lo..hi; bad is the error for anything else.
func toIntIn(v any, lo, hi int64, bad error) (int, error) {
	var n int64
	switch x := v.(type) {
	case json.Number:
		i, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return 0, bad
		}
		n = i
	default:
		i, ok := toInt64(v)
		if !ok {
			u, uok := toUint64(v)
			if !uok || u > uint64(hi) {
				return 0, bad
			}
			i = int64(u)
		}
		n = i
	}
	if n < lo || n > hi {
		return 0, bad
	}
	return int(n), nil
}
