package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// The journal is the stream mapping.JournalStream (on the target NATS) where
// the migrator keeps what it needs to survive being killed: per queue, the
// properties it found on the source before touching anything; per message
// stored in the gateway but not yet acked on the source, enough to recognise
// it if the source delivers it again. Entries are deleted as the work they
// describe completes, so the stream stays as small as the work in progress.
//
// It is a plain stream rather than a KV bucket because a KV delete leaves a
// marker behind: one per message migrated.
//
// Subjects: lmq.migrate.<source>.q.<enc> (mapping.JournalPrefix...) holds a
// queue record, lmq.migrate.<source>.f.<enc>.<id> a message in flight.

// journal is the migrator's state in the journal stream, for one source. Subjects
// carry a token of the source URL so that migrations from several sources
// into one gateway keep apart.
type journal struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	src    string // subject prefix of this source, ending in "."
}

// queueRecord is written before the migrator changes anything about a queue
// (it may raise the queue's timeout on the source); a re-run takes the
// properties from here rather than from the source.
type queueRecord struct {
	Queue         string          `json:"queue"`
	Props         json.RawMessage `json:"props"`
	TimeoutRaised bool            `json:"timeout_raised,omitempty"`
	Started       time.Time       `json:"started"`
}

// flight is a message in hand: journaled before it is stored, deleted once
// it is acked on the source. If the migrator dies in between, the source
// delivers it again after its timeout: if the copy was stored, the one that
// comes then is a duplicate.
type flight struct {
	Queue string    `json:"queue"`
	ID    string    `json:"id"`    // the source's delivery id
	Retry int       `json:"retry"` // its x-lmq-retry-remaining
	Sum   string    `json:"sum"`   // messageSum of the content
	Bytes int       `json:"bytes"`
	At    time.Time `json:"at"`
	// After is a stream sequence of the target queue before the copy: a
	// re-run looks for the copy after it.
	After uint64 `json:"after"`
	seq   uint64 // its journal message
}

func openJournal(ctx context.Context, js jetstream.JetStream, from string, replicas int) (*journal, error) {
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        mapping.JournalStream,
		Description: "lmq-gateway migrate: queues and messages in progress",
		Subjects:    []string{mapping.JournalPrefix + ">"},
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		// One record per queue: a newer one replaces it. Flights have a
		// subject each.
		MaxMsgsPerSubject: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("migration journal: %w", err)
	}
	sum := sha256.Sum256([]byte(from))
	return &journal{js: js, stream: st, src: mapping.JournalPrefix + "s" + hex.EncodeToString(sum[:6]) + "."}, nil
}

func (j *journal) queueSubject(queue string) string {
	return j.src + "q." + mapping.EncodeName(queue)
}

func (j *journal) flightSubject(queue, id string) string {
	return j.src + "f." + mapping.EncodeName(queue) + "." + idToken(id)
}

// idToken makes a delivery id usable as a subject token: UUIDs as they are,
// anything else hashed.
func idToken(id string) string {
	ok := id != "" && len(id) <= 64
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-'
	}
	if ok {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "h" + hex.EncodeToString(sum[:16])
}

// queue returns the record of a queue left by an earlier run, or nil.
func (j *journal) queue(ctx context.Context, queue string) (*queueRecord, error) {
	m, err := j.stream.GetLastMsgForSubject(ctx, j.queueSubject(queue))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	var rec queueRecord
	if err := json.Unmarshal(m.Data, &rec); err != nil {
		return nil, fmt.Errorf("journal record %s: %w", m.Subject, err)
	}
	return &rec, nil
}

func (j *journal) putQueue(ctx context.Context, rec queueRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := j.js.Publish(ctx, j.queueSubject(rec.Queue), b); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

func (j *journal) dropQueue(ctx context.Context, queue string) error {
	if err := j.stream.Purge(ctx, jetstream.WithPurgeSubject(j.queueSubject(queue))); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

func (j *journal) putFlight(ctx context.Context, f *flight) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	ack, err := j.js.Publish(ctx, j.flightSubject(f.Queue, f.ID), b)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	f.seq = ack.Sequence
	return nil
}

func (j *journal) dropFlight(ctx context.Context, f *flight) error {
	err := j.stream.DeleteMsg(ctx, f.seq)
	if err != nil && !jsapi.MsgGone(err) {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// flights lists the messages left in flight by earlier runs.
func (j *journal) flights(ctx context.Context) ([]*flight, error) {
	info, err := j.stream.Info(ctx, jetstream.WithSubjectFilter(j.src+"f.>"))
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	var out []*flight
	for subj := range info.State.Subjects {
		m, err := j.stream.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		f := &flight{seq: m.Sequence}
		if err := json.Unmarshal(m.Data, f); err != nil {
			continue // not ours to judge; leave it
		}
		out = append(out, f)
	}
	return out, nil
}
