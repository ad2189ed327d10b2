package accumulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

const (
	// ptrPrefix + enc is a queue's window pointer: its open window, if any.
	ptrPrefix = "w."
	// jobPrefix + enc + "." + window id is the close job of a window.
	jobPrefix = "j."
	// markerTTL is how long the marker of a removed pointer or job stays in
	// the bucket; watchers see it at once, so it only has to outlive a late
	// close election of the same window (see electJob).
	markerTTL = time.Minute
)

// window is a pointer's value: one accumulation window of one queue. accum
// and retry are fixed here when the window opens.
type window struct {
	ID       string `json:"id"`
	Queue    string `json:"queue"`
	Opened   int64  `json:"opened"`   // Unix ns
	Deadline int64  `json:"deadline"` // Unix ns: Opened + accum
	Retry    int    `json:"retry"`
	Opener   string `json:"opener"` // id of the gateway that opened it
}

func (w *window) deadline() time.Time { return time.Unix(0, w.Deadline) }

// jobState is the progress of a close job.
type jobState string

const (
	// stClosing: the job exists; its pointer may still name the window and
	// the cut may be unset.
	stClosing jobState = "closing"
	// stPublishing: the pointer no longer names the window, the cut is fixed,
	// and the compound message may have been stored.
	stPublishing jobState = "publishing"
	// stPublished: the compound message is stored; only the parts remain to
	// be removed.
	stPublished jobState = "published"
)

// job is a close job's value.
type job struct {
	window
	State jobState `json:"state"`
	// Owner is the gateway running the job; Lease is when others may take it
	// over (Unix ns) even if the owner still answers.
	Owner string `json:"owner"`
	Lease int64  `json:"lease"`
	// Cut is the stream sequence that decides membership: a part tagged with
	// the window belongs to it if and only if its sequence is ≤ Cut. Set once,
	// by the job's runner or by a pusher, after the pointer stopped naming
	// the window.
	Cut *uint64 `json:"cut,omitempty"`
	// LQ is the stream's last sequence before the compound message was first
	// stored: a compound stored by an earlier attempt is after it.
	LQ uint64 `json:"lq,omitempty"`
}

func ptrKey(enc string) string         { return ptrPrefix + enc }
func jobKey(enc, window string) string { return jobPrefix + enc + "." + window }

// parseJobKey splits a job key into the encoded queue and the window id.
func parseJobKey(key string) (enc, window string, ok bool) {
	rest, ok := strings.CutPrefix(key, jobPrefix)
	if !ok {
		return "", "", false
	}
	enc, window, ok = strings.Cut(rest, ".")
	return enc, window, ok && enc != "" && window != ""
}

// entry is the latest state of a key: live with a value, or removed (rev is
// then the marker's revision, 0 if there is none).
type entry struct {
	value []byte
	rev   uint64
	live  bool
}

// read returns the latest entry of key from the bucket stream's leader
// (kv.KV.Latest). KV.Get may be answered by any replica, which can be
// behind; the membership decisions of pushes need a read that sees every
// write acknowledged before it. While a new leader is being elected, the
// read is repeated within opTimeout.
func (a *Accumulator) read(ctx context.Context, key string) (entry, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	e, err := a.kv.Latest(ctx, key)
	switch {
	case errors.Is(err, kv.ErrKeyNotFound):
		return entry{}, nil
	case err != nil:
		return entry{}, err
	case e.Op != kv.OpPut:
		return entry{rev: e.Revision}, nil
	}
	return entry{value: e.Value, rev: e.Revision, live: true}, nil
}

// readJob reads a job; ok is false when it does not exist (finished).
func (a *Accumulator) readJob(ctx context.Context, key string) (j job, rev uint64, ok bool, err error) {
	e, err := a.read(ctx, key)
	if err != nil || !e.live {
		return job{}, 0, false, err
	}
	if err := json.Unmarshal(e.value, &j); err != nil {
		return job{}, 0, false, fmt.Errorf("job %s: %w", key, err)
	}
	return j, e.rev, true, nil
}

var (
	// errJobGone: the job was finished (by another runner).
	errJobGone = errors.New("close job finished elsewhere")
	// errJobLost: another gateway took the job over.
	errJobLost = errors.New("close job taken over by another gateway")
)

// jobRef is a job as its runner last wrote or read it.
type jobRef struct {
	key string
	enc string
	j   job
	rev uint64
	// renewed, if set, is called after each write (which renewed the lease).
	renewed func()
}

// update applies mutate to the job and writes it, as this gateway's, with
// the revision it was read at, renewing the lease. owner is whom the job must
// belong to before the write: this gateway, or the one it takes the job over
// from. A conflict (a pusher fixing the cut) re-reads the job and applies
// mutate again, so mutate must decide from the job it is given. It fails with
// errJobGone or errJobLost when the job finished or changed hands.
func (a *Accumulator) update(ctx context.Context, r *jobRef, owner string, mutate func(*job)) error {
	for attempt := 1; ; attempt++ {
		nj := r.j
		if nj.Cut != nil {
			c := *nj.Cut
			nj.Cut = &c
		}
		mutate(&nj)
		nj.Owner = a.id
		nj.Lease = time.Now().Add(a.lease).UnixNano()
		b, err := json.Marshal(nj)
		if err != nil {
			return err
		}
		uctx, cancel := context.WithTimeout(ctx, opTimeout)
		rev, err := a.kv.Update(uctx, r.key, b, r.rev)
		cancel()
		if err == nil {
			r.j, r.rev = nj, rev
			if r.renewed != nil {
				r.renewed()
			}
			return nil
		}
		if !errors.Is(err, kv.ErrRevisionMismatch) {
			return fmt.Errorf("update close job: %w", err)
		}
		gone, err := a.reread(ctx, r, owner, attempt)
		if err != nil {
			return err
		}
		if gone {
			return errJobGone
		}
	}
}

// remove deletes key if it is still at revision rev, leaving a marker that
// expires after markerTTL. It reports false on a revision mismatch.
func (a *Accumulator) remove(ctx context.Context, key string, rev uint64) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	err := a.kv.Purge(ctx, key, kv.LastRevision(rev), kv.MarkerTTL(markerTTL))
	if errors.Is(err, kv.ErrRevisionMismatch) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("remove %s: %w", key, err)
	}
	return true, nil
}
