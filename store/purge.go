package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Purging a queue (beyond LMQ): its waiting messages go, the queue, its
// properties and its dead letters stay. The messages are removed with one
// subject-filtered stream purge per kind (mapping.WaitingSubjects);
// deliveries in flight are on those subjects too (a WorkQueue stream keeps
// a message until its ack), so they go with the rest: JetStream drops them
// from the consumer's pending set, an ack of one still succeeds, and a
// release finds its message gone and puts nothing back.

// purgeRank orders the kinds of waiting subjects so that a message moving
// from one kind to another while the purge runs (a delay coming due, a
// window's parts becoming a compound message, a group's next message
// becoming its head) is purged where it lands: sources before their
// destinations, the deliverable subject last.
var purgeRank = map[string]int{"s": 0, "a": 1, "g": 2, "h": 3, "p": 4, "q": 5}

// PurgeWaiting removes every waiting message of queue: deliverable ones of
// every priority, delayed ones, parts of open accumulation windows and
// ordered groups' messages, in flight or not. Dead letters stay. Large
// bodies are PurgeBodies'.
func (h Consumers) PurgeWaiting(ctx context.Context, queue string) error {
	s := h.s
	st, err := s.queueStream(ctx, queue)
	if err != nil {
		return err
	}
	subjects := mapping.WaitingSubjects(queue)
	rank := func(subj string) int {
		kind, _, ok := mapping.ParseSubject(subj)
		if r, known := purgeRank[kind]; ok && known {
			return r
		}
		return len(purgeRank) // a kind added later: before nothing
	}
	slices.SortStableFunc(subjects, func(a, b string) int { return rank(a) - rank(b) })
	for _, subj := range subjects {
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			return Classify("purge queue", err)
		}
	}
	return nil
}

// BodyGrace is how long a large body may exist before the message that
// refers to it is stored: a push stores its body first, and its message
// within seconds (an accumulating queue's part within 30 s). PurgeBodies
// leaves younger bodies alone, whether a message refers to them yet or
// not.
const BodyGrace = 2 * time.Minute

// maxRefScan bounds the messages PurgeBodies reads to learn which bodies
// are still referred to; beyond it no body is removed (left, not lost).
const maxRefScan = 100_000

// PurgeBodies removes the queue's large bodies stored before before that no
// message of the queue stored now refers to (after PurgeWaiting: those of
// the purged messages). Bodies of dead letters and of messages stored
// since stay. A body of a delivery in flight at the purge goes too: its
// content was read whole when it was handed out, and nothing reads it
// again (a release finds the message gone). Failures leave bodies behind
// (logged), never remove one in use.
func (h Bodies) PurgeBodies(ctx context.Context, queue string, before time.Time) {
	s := h.s
	obj := s.existingObjects(ctx)
	if obj == nil {
		return
	}
	list, err := obj.List(ctx)
	if err != nil {
		if !errors.Is(err, jetstream.ErrNoObjectsFound) {
			s.log.Warn("purge: could not list large bodies; they stay", "queue", queue, "err", err)
		}
		return
	}
	// Bodies stored before the upgrade from the one-stream-per-queue
	// layout keep that layout's name.
	prefix, legacy := mapping.EncodeName(queue)+"/", mapping.LegacyEncodeName(queue)+"/"
	var candidates []string
	for _, info := range list {
		if info.Deleted || !info.ModTime.Before(before) {
			continue
		}
		if strings.HasPrefix(info.Name, prefix) || strings.HasPrefix(info.Name, legacy) {
			candidates = append(candidates, info.Name)
		}
	}
	if len(candidates) == 0 {
		return
	}
	refs, err := s.bodyRefs(ctx, queue)
	if err != nil {
		s.log.Warn("purge: could not tell which large bodies are in use; they stay", "queue", queue, "err", err)
		return
	}
	for _, name := range candidates {
		if refs[name] {
			continue
		}
		if err := obj.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			s.log.Warn("purge: could not delete large body", "queue", queue, "object", name, "err", err)
		}
	}
}

// errTooManyRefs: the queue holds more messages than PurgeBodies reads.
var errTooManyRefs = errors.New("more messages than a purge reads for large bodies")

// bodyRefs are the large bodies the queue's stored messages (of every
// kind, dead letters included) refer to.
func (s *Store) bodyRefs(ctx context.Context, queue string) (map[string]bool, error) {
	st, err := s.queueStream(ctx, queue)
	if err != nil {
		return nil, err
	}
	refs := make(map[string]bool)
	read := 0
	for _, subj := range mapping.QueueSubjects(queue) {
		for seq := uint64(1); ; {
			rm, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return nil, Classify("read queue stream", err)
			}
			if read++; read > maxRefScan {
				return nil, errTooManyRefs
			}
			if ref := rm.Header.Get(mapping.HdrObject); ref != "" {
				refs[ref] = true
			}
			seq = rm.Sequence + 1
		}
	}
	return refs, nil
}

// existingObjects is the large-body bucket, nil when none was ever made
// (or it cannot be opened now).
func (s *Store) existingObjects(ctx context.Context) jetstream.ObjectStore {
	s.objMu.Lock()
	obj := s.obj
	s.objMu.Unlock()
	if obj != nil {
		return obj
	}
	if _, err := s.js.ObjectStore(ctx, mapping.ObjectBucket); err != nil {
		return nil // no large bodies were ever stored
	}
	obj, err := s.objectStore(ctx)
	if err != nil {
		return nil
	}
	return obj
}
