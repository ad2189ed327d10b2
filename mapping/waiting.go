package mapping

// Which subjects hold a queue's waiting messages, answered once for the
// core's peeks, deletions and moves of waiting messages, its pulls' looks
// and the store's scans and counts.
//
// A message waits when a pull may hand it out, now or once its group
// reaches it: it is on a subject one of the queue's consumers reads
// (LevelSubjects: the queue's subject and its groups' heads for level 0, a
// priority level's subject for the others), or in a group's backlog. A
// group's head copy stands for the oldest message of its backlog, so a
// count of waiting messages leaves the heads out (CountsWaiting). Delayed
// messages (schedules), parts of open accumulation windows and dead letters
// do not wait. (A purge takes delayed messages and parts too:
// WaitingSubjects.)

// LevelSubjects are the subjects the consumer of the queue's priority
// level p reads: level 0's reads its groups' heads beside the queue's
// subject (when it reads heads at all: store/consumers.go).
func LevelSubjects(queue string, p int) []string {
	if p > 0 {
		return []string{PrioritySubject(queue, p)}
	}
	return []string{QueueSubject(queue), HeadWildcard(queue)}
}

// WaitingFilters are subject filters covering every subject that may hold
// a waiting message of the queue: its subject, its groups' heads, its
// priority levels and its groups' backlogs (one stream info request each).
func WaitingFilters(queue string) []string {
	return []string{QueueSubject(queue), HeadWildcard(queue), PriorityWildcard(queue), GroupWildcard(queue)}
}

// ShardWaitingFilters are subject filters covering the waiting messages of
// every queue of shard k, each counted once (no heads): the queues'
// subjects, their priority levels and their groups' backlogs. They are
// three, not one: a filter covering them all would also list every delayed
// message's schedule subject.
func ShardWaitingFilters(k int) []string {
	return []string{ShardQueueWildcard(k), ShardPriorityWildcard(k), ShardGroupWildcard(k)}
}

// CountsWaiting reports whether the messages on subjects of kind
// (ParseSubject) count as their queue's waiting messages: the queue's
// subject, its priority levels and its groups' backlogs; not the groups'
// head copies, nor delayed messages, parts or dead letters.
func CountsWaiting(kind string) bool { return kind == "q" || kind == "p" || kind == "g" }

// Waiting is where a waiting message of a queue is (WaitingOf).
type Waiting struct {
	// Level is the priority level whose consumer reads it (for a group's
	// head copy, 0; for a backlog message, none: 0).
	Level int
	// Group is its ordered group, "" for none.
	Group string
	// Head: it is its group's head copy (read by level 0's consumer);
	// false with Group set: a message of its group's backlog.
	Head bool
}

// WaitingOf tells where a message of queue stored on subject waits; ok is
// false when that subject holds no waiting message of the queue (another
// queue's, a delayed message, a part, a dead letter).
func WaitingOf(queue, subject string) (w Waiting, ok bool) {
	if p, ok := SubjectPriority(subject); ok {
		return Waiting{Level: p}, subject == PrioritySubject(queue, p)
	}
	g, ok := GroupFromSubject(subject)
	if !ok {
		return Waiting{}, false
	}
	switch subject {
	case HeadSubject(queue, g):
		return Waiting{Group: g, Head: true}, true
	case GroupSubject(queue, g):
		return Waiting{Group: g}, true
	}
	return Waiting{}, false
}
