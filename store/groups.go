package store

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// The storage of ordered groups (mapping/groups.go; the core's rules are in
// gateway/groups.go): a group's backlog, its head copy, and the look at
// which groups have a backlog but no head.

// headMsgIDPrefix starts the Nats-Msg-Id of a head copy: with the backlog
// message's sequence it makes a second copy of the same message within the
// stream's duplicate window (2 minutes) a duplicate JetStream drops. Push
// idempotency ids (hex:key) never start with it.
const headMsgIDPrefix = "lmq-head:"

// GroupOldest returns the oldest message of queue's group g's backlog; nil
// when the backlog is empty.
func (h Groups) GroupOldest(ctx context.Context, queue, g string) (*StoredMsg, error) {
	s := h.s
	return s.firstOn(ctx, queue, mapping.GroupSubject(queue, g))
}

// firstOn returns the first message on subject in queue's shard; nil when
// there is none.
func (s *Store) firstOn(ctx context.Context, queue, subject string) (*StoredMsg, error) {
	st, err := s.queueStream(ctx, queue)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	rm, err := st.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, Classify("read group", err)
	}
	return storedMsg(rm), nil
}

// LastOn returns the sequence of the last message on subject in queue's
// shard; 0 when there is none.
func (h Groups) LastOn(ctx context.Context, queue, subject string) (uint64, error) {
	s := h.s
	st, err := s.queueStream(ctx, queue)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	rm, err := st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, Classify("read group head", err)
	}
	return rm.Sequence, nil
}

// Has reports whether queue's shard still holds sequence seq.
func (h Groups) Has(ctx context.Context, queue string, seq uint64) (bool, error) {
	s := h.s
	st, err := s.queueStream(ctx, queue)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	_, err = st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, Classify("look up message", err)
	}
	return true, nil
}

// Remove removes queue's message at seq (not its Object Store body); one
// already gone is fine.
func (h Groups) Remove(ctx context.Context, queue string, seq uint64) error {
	s := h.s
	st, err := s.queueStream(ctx, queue)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	if err := st.DeleteMsg(ctx, seq); err != nil && !jsapi.MsgGone(err) {
		return Classify("delete message", err)
	}
	return nil
}

// Promote stores a head copy of m, the oldest message of queue's group g,
// unless the group's head subject holds another message than the head
// being ended, after (0: none): promoted is false (and err nil) when it
// does, or when m was copied already (JetStream's duplicate window). Of any
// number of gateways promoting the group at once, exactly one succeeds.
func (h Groups) Promote(ctx context.Context, queue, g string, m *StoredMsg, after uint64) (promoted bool, err error) {
	s := h.s
	cp := bus.NewMsg(mapping.HeadSubject(queue, g))
	for k, v := range m.Header {
		if !strings.HasPrefix(k, "Nats-") {
			cp.Header[k] = v
		}
	}
	cp.Header.Set(mapping.HdrGroup, g)
	cp.Header.Set(mapping.HdrGroupSeq, strconv.FormatUint(m.Seq, 10))
	jsapi.SetExpectLastSubjectSeq(cp.Header, after)
	jsapi.SetMsgID(cp.Header, headMsgIDPrefix+strconv.FormatUint(m.Seq, 10))
	cp.Data = m.Data
	if _, err := s.Publish(ctx, "store group head", queue, cp); err != nil {
		if WrongLast(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// WrongLast reports whether a store failed because its subject's last
// sequence was not the one expected (Nats-Expected-Last-Subject-Sequence):
// another gateway stored there first.
func WrongLast(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// StrandedGroups returns the groups of queue whose backlog holds messages
// while their head subject holds none: a gateway stopped between the end
// of a head and the copy of the next (gateway/groups.go). It also reports
// whether the queue has any group backlog at all.
func (h Groups) StrandedGroups(ctx context.Context, queue string) (stranded []string, any bool, err error) {
	s := h.s
	st, err := s.queueStream(ctx, queue)
	if err != nil {
		return nil, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	backlog, err := st.Info(ctx, jetstream.WithSubjectFilter(mapping.GroupWildcard(queue)))
	if err != nil {
		return nil, false, Classify("look at groups", err)
	}
	if len(backlog.State.Subjects) == 0 {
		return nil, false, nil
	}
	heads, err := st.Info(ctx, jetstream.WithSubjectFilter(mapping.HeadWildcard(queue)))
	if err != nil {
		return nil, true, Classify("look at group heads", err)
	}
	headed := make(map[string]bool, len(heads.State.Subjects))
	for subj, n := range heads.State.Subjects {
		if g, ok := mapping.GroupFromSubject(subj); ok && n > 0 {
			headed[g] = true
		}
	}
	for subj, n := range backlog.State.Subjects {
		if g, ok := mapping.GroupFromSubject(subj); ok && n > 0 && !headed[g] {
			stranded = append(stranded, g)
		}
	}
	return stranded, true, nil
}

// restoreHeads stores again each of queue's group heads at or below
// sequence upTo, a copy at the tail of its head subject (expecting the
// original there, as a release does), then removes the original: heads
// that the queue's consumer looked past while it did not read the head
// subjects (consumers.go, "Group heads"), and would never deliver. Those
// were never delivered by it, and it never goes back below upTo, so none
// of them is in flight. A head replaced meanwhile is left to its
// replacement.
func (s *Store) restoreHeads(ctx context.Context, queue string, upTo uint64) error {
	st, err := s.queueStream(ctx, queue)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	heads, err := st.Info(ctx, jetstream.WithSubjectFilter(mapping.HeadWildcard(queue)))
	if err != nil {
		return Classify("look at group heads", err)
	}
	for subj, n := range heads.State.Subjects {
		if n == 0 {
			continue
		}
		rm, err := st.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return Classify("read group head", err)
		}
		if rm.Sequence > upTo {
			continue
		}
		cp := bus.NewMsg(subj)
		for k, v := range rm.Header {
			if !strings.HasPrefix(k, "Nats-") {
				cp.Header[k] = v
			}
		}
		jsapi.SetExpectLastSubjectSeq(cp.Header, rm.Sequence)
		cp.Data = rm.Data
		if _, err := s.Publish(ctx, "restore group head", queue, cp); WrongLast(err) {
			continue
		} else if err != nil {
			return err
		}
		if err := st.DeleteMsg(ctx, rm.Sequence); err != nil && !jsapi.MsgGone(err) {
			return Classify("delete group head", err)
		}
	}
	return nil
}
