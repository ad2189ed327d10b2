package store

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// The core's reads of a shard stream (Shard): its per-subject counts, its
// stored messages by subject and sequence, its consumers' positions, and
// the removals the core makes by sequence or subject, in this package's
// types, so that no JetStream type leaves it. Every error is classified
// (Classify); "not there" answers are values, not errors.

// Shard is a handle on one shard stream LMQS_kk, from Store.Shard,
// QueueShard or LookupShard. It names the stream: it stays usable (and
// answers "stream not found" as ErrUnavailable) while an operator's
// deletion of the stream is not yet mended, and works again once the
// stream is made again. Safe for concurrent use; callers may keep it.
type Shard struct {
	k  int
	st jetstream.Stream
}

// Index is the shard's number (mapping.Shard).
func (sh *Shard) Index() int { return sh.k }

// StoredMsg is a message read back from a shard stream by sequence.
// Everything in it is input: anyone who may publish on a queue subject
// may have stored anything.
type StoredMsg struct {
	Subject string
	// Seq is its stream sequence.
	Seq    uint64
	Header bus.Headers
	Data   []byte
	// Time is when JetStream stored it.
	Time time.Time
}

// storedMsg converts a JetStream answer (nil stays nil).
func storedMsg(rm *jetstream.RawStreamMsg) *StoredMsg {
	if rm == nil {
		return nil
	}
	return &StoredMsg{Subject: rm.Subject, Seq: rm.Sequence, Header: bus.Headers(rm.Header), Data: rm.Data, Time: rm.Time}
}

// ShardInfo is a shard stream's state, with the per-subject counts of the
// subjects one filter matched (Shard.Info).
type ShardInfo struct {
	// Msgs and Bytes are the whole stream's.
	Msgs, Bytes uint64
	// Consumers counts the stream's consumers.
	Consumers int
	// Subjects counts the messages of each subject the filter matched
	// (subjects without messages are absent).
	Subjects map[string]uint64
	// Cluster is where the stream is stored; nil outside a cluster.
	Cluster *Cluster
	// At is when the stream's leader answered, by its clock.
	At time.Time
}

// Cluster is the placement of a stream in a NATS cluster.
type Cluster struct {
	// Leader is the server leading the stream ("" during an election).
	Leader string
	// LeaderSince is when it became leader; zero when unknown.
	LeaderSince time.Time
	// Replicas are the other servers storing the stream.
	Replicas []Replica
}

// Replica is one follower of a stream as its leader sees it.
type Replica struct {
	Name string
	// Current: up to date, by JetStream's word.
	Current bool
	// Offline: JetStream counts it offline.
	Offline bool
	// Active is how long ago the leader last heard from it; 0 when it has
	// not since it leads.
	Active time.Duration
}

func shardInfo(info *jetstream.StreamInfo) *ShardInfo {
	out := &ShardInfo{
		Msgs: info.State.Msgs, Bytes: info.State.Bytes, Consumers: info.State.Consumers,
		Subjects: info.State.Subjects, At: info.TimeStamp,
	}
	if ci := info.Cluster; ci != nil {
		c := &Cluster{Leader: ci.Leader}
		if ci.LeaderSince != nil {
			c.LeaderSince = *ci.LeaderSince
		}
		for _, p := range ci.Replicas {
			if p != nil {
				c.Replicas = append(c.Replicas, Replica{Name: p.Name, Current: p.Current, Offline: p.Offline, Active: p.Active})
			}
		}
		out.Cluster = c
	}
	return out
}

// Info returns the stream's state with the counts of the subjects that
// filter (wildcards allowed) matches: one request.
func (sh *Shard) Info(ctx context.Context, filter string) (*ShardInfo, error) {
	info, err := sh.st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, Classify("stream info", err)
	}
	return shardInfo(info), nil
}

// SubjectCounts returns the messages of each subject filter matches
// (Info's Subjects).
func (sh *Shard) SubjectCounts(ctx context.Context, filter string) (map[string]uint64, error) {
	info, err := sh.st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, Classify("stream info", err)
	}
	return info.State.Subjects, nil
}

// Next returns the first message on subject (wildcards allowed) at or
// after stream sequence from, by a direct read; nil when there is none.
func (sh *Shard) Next(ctx context.Context, subject string, from uint64) (*StoredMsg, error) {
	rm, err := sh.st.GetMsg(ctx, from, jetstream.WithGetMsgSubject(subject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, Classify("read stream", err)
	}
	return storedMsg(rm), nil
}

// Delete removes the message at seq (not its Object Store body); one
// already gone is fine.
func (sh *Shard) Delete(ctx context.Context, seq uint64) error {
	if err := sh.st.DeleteMsg(ctx, seq); err != nil && !jsapi.MsgGone(err) {
		return Classify("delete message", err)
	}
	return nil
}

// PurgeSubject removes every message of subject and returns how many the
// stream held just before (two requests: a count, then the purge).
func (sh *Shard) PurgeSubject(ctx context.Context, subject string) (uint64, error) {
	info, err := sh.st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, Classify("stream info", err)
	}
	n := info.State.Subjects[subject]
	if err := sh.st.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return 0, Classify("purge", err)
	}
	return n, nil
}

// ConsumerState is where one consumer of a shard stream stands.
type ConsumerState struct {
	// Filter is the first subject it reads (a queue's own consumer reads
	// its groups' heads too).
	Filter string
	// Delivered is the stream sequence of the last message it handed out.
	Delivered uint64
	// AckPending counts messages it handed out and has not had answered.
	AckPending int
}

func consumerState(ci *jetstream.ConsumerInfo) ConsumerState {
	if ci == nil {
		return ConsumerState{}
	}
	filter := ci.Config.FilterSubject
	if filter == "" && len(ci.Config.FilterSubjects) > 0 {
		filter = ci.Config.FilterSubjects[0]
	}
	return ConsumerState{Filter: filter, Delivered: ci.Delivered.Stream, AckPending: ci.NumAckPending}
}

// Consumer returns the state of the durable consumer name (one request);
// found is false (and err nil) when the stream has no such consumer.
func (sh *Shard) Consumer(ctx context.Context, name string) (c ConsumerState, found bool, err error) {
	cons, err := sh.st.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return ConsumerState{}, false, nil
	}
	if err != nil {
		return ConsumerState{}, false, Classify("consumer info", err)
	}
	return consumerState(cons.CachedInfo()), true, nil
}

// Consumers returns the state of every consumer of the stream (paged
// listing requests).
func (sh *Shard) Consumers(ctx context.Context) ([]ConsumerState, error) {
	var out []ConsumerState
	l := sh.st.ListConsumers(ctx)
	for ci := range l.Info() {
		out = append(out, consumerState(ci))
	}
	if err := l.Err(); err != nil {
		return out, Classify("list consumers", err)
	}
	return out, nil
}
