package mapping

import "strings"

// The layout of versions before the shards (one WorkQueue stream per queue,
// "LMQ_<enc>", with a durable consumer "lmq"), for the upgrade that moves
// such queues into the shards (package upgrade). Names longer than fit a
// stream name were hashed then; the name is in the stream's metadata
// (MetaQueueName).
const (
	// LegacyStreamPrefix starts every old-layout queue stream name.
	LegacyStreamPrefix = "LMQ_"
	// LegacyConsumerName is the durable consumer every old queue stream has.
	LegacyConsumerName = "lmq"
	// legacyMaxDirectEnc is the longest direct encoding an old stream name held.
	legacyMaxDirectEnc = maxNameLen - len(LegacyStreamPrefix)
)

// LegacyEncodeName is the old token of a queue name: EncodeName, or "_" plus
// a base32hex SHA-256 for names whose encoding did not fit a stream name.
func LegacyEncodeName(name string) string { return encodeWithin(name, legacyMaxDirectEnc) }

// LegacyStreamName is the old stream of a queue.
func LegacyStreamName(queue string) string { return LegacyStreamPrefix + LegacyEncodeName(queue) }

// LegacyQueueFromStream returns the old token of an old-layout stream name
// (ok false for any other stream). Decode it with DecodeName; hashed tokens
// (starting "_") do not decode, and the stream's metadata has the name.
func LegacyQueueFromStream(stream string) (enc string, ok bool) {
	if !strings.HasPrefix(stream, LegacyStreamPrefix) || len(stream) == len(LegacyStreamPrefix) {
		return "", false
	}
	return stream[len(LegacyStreamPrefix):], true
}

// LegacyQueueSubject, LegacyPartSubject and LegacyDeadSubject are the old
// subjects of a queue's messages, parts and dead letters; old schedules are
// on LegacyScheduleWildcard.
func LegacyQueueSubject(queue string) string { return SubjectPrefix + ".q." + LegacyEncodeName(queue) }

// LegacyPartSubject: see LegacyQueueSubject.
func LegacyPartSubject(queue string) string { return SubjectPrefix + ".a." + LegacyEncodeName(queue) }

// LegacyDeadSubject: see LegacyQueueSubject.
func LegacyDeadSubject(queue string) string { return SubjectPrefix + ".d." + LegacyEncodeName(queue) }

// LegacyScheduleWildcard matches the old schedules of a queue.
func LegacyScheduleWildcard(queue string) string {
	return SubjectPrefix + ".s." + LegacyEncodeName(queue) + ".*"
}

// LegacyPropsKey is the old key of a queue's own properties in PropsBucket
// (it differs from PropsKey only for hashed names).
func LegacyPropsKey(queue string) string { return PropsKeyPrefix + LegacyEncodeName(queue) }
