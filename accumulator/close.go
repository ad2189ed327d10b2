package accumulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

const (
	// strayAge is how old a part of no live window must be before a close
	// removes it: far beyond pushTimeout, so that no push is still deciding
	// about it.
	strayAge = 10 * time.Minute
	// evidenceScan bounds the search for a compound message stored by an
	// earlier, interrupted run of a close.
	evidenceScan = 100_000
)

// closeDue starts the close of the window p when its time has come: it
// creates the window's close job, which elects this gateway as its runner,
// and runs it.
func (a *Accumulator) closeDue(ctx context.Context, enc string, p ptrEntry) (time.Time, error) {
	cur, err := a.read(ctx, ptrKey(enc))
	if err != nil {
		return time.Time{}, err
	}
	if !cur.live || cur.rev != p.rev {
		return time.Time{}, nil // already being closed elsewhere
	}
	r := &jobRef{
		key: jobKey(enc, p.w.ID),
		enc: enc,
		j:   job{window: p.w, State: stClosing, Owner: a.id, Lease: time.Now().Add(a.lease).UnixNano()},
	}
	b, err := json.Marshal(r.j)
	if err != nil {
		return time.Time{}, err
	}
	uctx, cancel := context.WithTimeout(ctx, opTimeout)
	// Expecting revision 0 rather than using Create: Create would also
	// overwrite the marker of a job that already ran for this window.
	r.rev, err = a.kv.Update(uctx, r.key, b, 0)
	cancel()
	if errors.Is(err, kv.ErrRevisionMismatch) {
		// The window has a job already: another gateway won the election,
		// or a runner stopped before it removed the pointer (this gateway
		// before a restart). Check that job here and now: while this close
		// runs, the scheduler drops the job's own turn (the window is busy
		// here), and both would be put off together again and again.
		j, rev, ok, err := a.readJob(ctx, r.key)
		if err != nil {
			return time.Time{}, err
		}
		if !ok {
			// Gone already, or, in a cluster, its write was still being
			// replicated: look again later in case that write failed.
			return time.Now().Add(checkDelay), nil
		}
		return a.checkJob(ctx, r.key, enc, jobEntry{j: j, rev: rev})
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("create close job: %w", err)
	}
	return time.Time{}, a.run(ctx, r)
}

// checkJob looks at a job this gateway does not run: its own after a failed
// run (run it again), or another gateway's (take it over if that gateway is
// dead or its lease ran out). It returns when to look again.
func (a *Accumulator) checkJob(ctx context.Context, key, enc string, je jobEntry) (time.Time, error) {
	r := &jobRef{key: key, enc: enc, j: je.j, rev: je.rev}
	if owner := je.j.Owner; owner != a.id {
		lease := time.Unix(0, je.j.Lease)
		if time.Now().Before(lease) && a.alive(ctx, owner) {
			return lease, nil
		}
		err := a.update(ctx, r, owner, func(*job) {})
		if errors.Is(err, errJobGone) || errors.Is(err, errJobLost) {
			return time.Time{}, nil
		}
		if err != nil {
			return time.Time{}, err
		}
		a.log.Info("took over a close job", "queue", je.j.Queue, "window", je.j.ID, "from", owner)
	}
	return time.Time{}, a.run(ctx, r)
}

// part is a part of the window being closed.
type part struct {
	e *gateway.Entry
	// body is the decoded part (only when the compound is to be built).
	body gateway.Message
}

// run drives a close job to its end. Every step can be repeated after a
// crash or by another runner and gives the same result; the job's state
// says which steps are done.
func (a *Accumulator) run(ctx context.Context, r *jobRef) error {
	// A runner must stop before its lease ends, when another may take over;
	// each write of the job renews the lease.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := time.AfterFunc(a.lease*5/6, cancel)
	defer stop.Stop()
	r.renewed = func() { stop.Reset(a.lease * 5 / 6) }
	err := a.steps(ctx, r)
	if errors.Is(err, errJobGone) || errors.Is(err, errJobLost) {
		return nil // finished or continued by another gateway
	}
	return err
}

// steps is run's work.
func (a *Accumulator) steps(ctx context.Context, r *jobRef) error {
	if r.j.State == stClosing {
		// Fence: pushes that read the pointer from now on open a new window;
		// pushes that read it before have stored their part (or will find
		// out that they are too late).
		if err := a.fence(ctx, r); err != nil {
			return err
		}
	}
	// Read after the fence: its last sequence can serve as the cut.
	st, err := a.core.Logs().QueueLog(ctx, r.j.Queue)
	if errors.Is(err, gateway.ErrNotFound) {
		// The queue was deleted, and the window's parts with it.
		return a.finish(ctx, r)
	}
	if err != nil {
		return err
	}
	// The parts as scanned by this run, if it did: the removal reuses them.
	var parts *scanned
	for {
		switch r.j.State {
		case stClosing, stPublishing:
			// In stPublishing an earlier run stopped around storing the
			// compound message, so it may be stored already; in stClosing
			// no run has stored it.
			resumed := r.j.State == stPublishing
			if !resumed {
				// The cut covers every part whose push saw the window still
				// open after storing it.
				last := st.LastSeq()
				err := a.update(ctx, r, a.id, func(j *job) {
					if j.Cut == nil {
						j.Cut = &last
					}
					j.LQ = last
					j.State = stPublishing
				})
				if err != nil {
					return err
				}
			}
			if parts, err = a.scan(ctx, st, r, true); err != nil {
				return err
			}
			if len(parts.of) == 0 {
				return a.finish(ctx, r)
			}
			stored := false
			if resumed {
				if stored, err = a.stored(ctx, st, r); err != nil {
					return err
				}
			}
			if !stored {
				// A purge of the queue (Gateway.Purge) removes the parts of
				// open windows, all of them at once. One that came after the
				// scan must not come back inside a compound: when the first
				// part is gone, scan again (this turn of the loop resumes
				// from stPublishing), which finds none and stores nothing.
				// A purge between this look and the store is not caught.
				if ok, err := st.Has(ctx, parts.of[0].e.Seq); err != nil {
					return err
				} else if !ok {
					a.log.Info("window's parts were purged; closing it without a compound", "queue", r.j.Queue, "window", r.j.ID)
					parts = nil
					continue
				}
				if err := a.publish(ctx, r, parts.of); err != nil {
					return err
				}
			}
			if err := a.update(ctx, r, a.id, func(j *job) { j.State = stPublished }); err != nil {
				return err
			}
			a.core.Messages().Notify(r.j.Queue)
		case stPublished:
			if parts == nil {
				if parts, err = a.scan(ctx, st, r, false); err != nil {
					return err
				}
			}
			if err := a.removeParts(ctx, st, r, parts); err != nil {
				return err
			}
			return a.finish(ctx, r)
		default:
			return fmt.Errorf("close job %s: unknown state %q", r.key, r.j.State)
		}
	}
}

// fence removes the window's pointer if it still names the window.
func (a *Accumulator) fence(ctx context.Context, r *jobRef) error {
	key := ptrKey(r.enc)
	for attempt := 1; ; attempt++ {
		cur, err := a.read(ctx, key)
		if err != nil || !cur.live {
			return err
		}
		var w window
		if err := json.Unmarshal(cur.value, &w); err != nil {
			return fmt.Errorf("window %s: %w", key, err)
		}
		if w.ID != r.j.ID {
			return nil
		}
		removed, err := a.remove(ctx, key, cur.rev)
		if err != nil || removed {
			return err
		}
		// Refused: the pointer changed, or (in a cluster) another write of
		// it was still being replicated.
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
}

// finish removes the job: the window is done.
func (a *Accumulator) finish(ctx context.Context, r *jobRef) error {
	for attempt := 1; ; attempt++ {
		removed, err := a.remove(ctx, r.key, r.rev)
		if err != nil || removed {
			return err
		}
		if gone, err := a.reread(ctx, r, a.id, attempt); gone || err != nil {
			return err
		}
	}
}

// reread reads r's job again after a write of it was refused, failing with
// errJobLost unless it still belongs to owner. When the job has not changed
// since r was read, another write of it was still being replicated (a
// cluster): it pauses first. gone reports that the job no longer exists.
func (a *Accumulator) reread(ctx context.Context, r *jobRef, owner string, attempt int) (gone bool, err error) {
	cur, rev, ok, err := a.readJob(ctx, r.key)
	switch {
	case err != nil:
		return false, err
	case !ok:
		return true, nil
	case cur.Owner != owner:
		return false, errJobLost
	}
	if rev == r.rev {
		if err := pause(ctx, attempt); err != nil {
			return false, err
		}
	}
	r.j, r.rev = cur, rev
	return false, nil
}

// scanned is what a scan found.
type scanned struct {
	// of are the window's parts in stream order, which is push order.
	of []part
	// alone: nothing but the window's parts is on the part subject up to
	// the cut, so a purge up to the cut removes exactly them.
	alone bool
}

// scan reads the window's parts: those tagged with the window up to the cut.
// On the way it removes stray parts (of no live window, left by a push that
// died before it removed its part that missed a window).
func (a *Accumulator) scan(ctx context.Context, st *gateway.QueueLog, r *jobRef, decode bool) (*scanned, error) {
	if r.j.Cut == nil {
		return nil, fmt.Errorf("close job %s: no cut", r.key)
	}
	cut := *r.j.Cut
	out := &scanned{alone: true}
	var stray []part
	renew := time.Now()
	for seq := uint64(1); seq <= cut; {
		if err := a.keepLease(ctx, r, &renew); err != nil {
			return nil, err
		}
		e, err := st.NextPart(ctx, seq)
		if err != nil {
			return nil, fmt.Errorf("read parts: %w", err)
		}
		if e == nil || e.Seq > cut {
			break
		}
		seq = e.Seq + 1
		p := part{e: e}
		if e.Window == r.j.ID {
			if decode {
				if p.body, err = a.core.Parts().PartContent(ctx, e); err != nil {
					return nil, fmt.Errorf("part %d: %w", e.Seq, err)
				}
			}
			out.of = append(out.of, p)
			continue
		}
		out.alone = false
		if time.Since(e.Time) > strayAge {
			stray = append(stray, p)
		}
	}
	a.removeStray(ctx, st, r, stray)
	return out, nil
}

// removeParts removes the window's parts and their large bodies (bodies
// first: a crash in between leaves parts that the next run removes, never
// orphan bodies).
func (a *Accumulator) removeParts(ctx context.Context, st *gateway.QueueLog, r *jobRef, parts *scanned) error {
	for _, p := range parts.of {
		a.core.Parts().DropBody(ctx, p.e)
	}
	if parts.alone && len(parts.of) > 1 {
		// One request instead of one per part. Sequences up to the cut were
		// all taken when it was fixed, so no other part can appear there.
		return st.PurgeParts(ctx, *r.j.Cut)
	}
	for _, p := range parts.of {
		if err := st.Delete(ctx, p.e.Seq); err != nil {
			return err
		}
	}
	return nil
}

// keepLease renews the job's lease during a long scan, every third of it.
func (a *Accumulator) keepLease(ctx context.Context, r *jobRef, last *time.Time) error {
	if time.Since(*last) < a.lease/3 {
		return nil
	}
	*last = time.Now()
	return a.update(ctx, r, a.id, func(*job) {})
}

// removeStray removes old parts whose window is neither open nor closing.
// Errors only leave them for the next close.
func (a *Accumulator) removeStray(ctx context.Context, st *gateway.QueueLog, r *jobRef, stray []part) {
	live := make(map[string]bool)
	for _, p := range stray {
		tag := p.e.Window
		l, ok := live[tag]
		if !ok {
			var err error
			if l, err = a.windowLive(ctx, r.enc, tag); err != nil {
				return
			}
			live[tag] = l
		}
		if l {
			continue
		}
		a.log.Warn("removing a stray accumulation part", "queue", r.j.Queue, "seq", p.e.Seq, "window", tag)
		a.core.Parts().DropBody(ctx, p.e)
		if err := st.Delete(ctx, p.e.Seq); err != nil {
			return
		}
	}
}

// windowLive reports whether window id of a queue is open or closing. The
// pointer is read before the job: a window's job is created before its
// pointer is removed, so no window slips between the two reads.
func (a *Accumulator) windowLive(ctx context.Context, enc, id string) (bool, error) {
	if id == "" {
		return false, nil
	}
	cur, err := a.read(ctx, ptrKey(enc))
	if err != nil {
		return false, err
	}
	if cur.live {
		var w window
		if json.Unmarshal(cur.value, &w) == nil && w.ID == id {
			return true, nil
		}
	}
	_, _, ok, err := a.readJob(ctx, jobKey(enc, id))
	return ok, err
}

// publish stores the compound message of the window: its parts in order,
// the window's retry, tagged with the window so that a later run finds it
// (see stored), pushed (for retention) when the window opened, as its oldest
// part has waited since then.
func (a *Accumulator) publish(ctx context.Context, r *jobRef, parts []part) error {
	msgs := make([]gateway.Message, len(parts))
	for i, p := range parts {
		msgs[i] = p.body
	}
	_, err := a.core.Logs().StoreCopy(ctx, r.j.Queue, gateway.Copy{
		Parts:    msgs,
		Retry:    r.j.Retry,
		Window:   r.j.ID,
		PushedAt: time.Unix(0, r.j.Opened),
	})
	if err != nil {
		return fmt.Errorf("store compound message: %w", err)
	}
	return nil
}

// stored reports whether an earlier run stored the window's compound
// message: it is a message tagged with the window on the queue's subject
// after LQ (its first copy, or the copy a release put at the tail).
func (a *Accumulator) stored(ctx context.Context, st *gateway.QueueLog, r *jobRef) (bool, error) {
	seq := r.j.LQ + 1
	renew := time.Now()
	for range evidenceScan {
		if err := a.keepLease(ctx, r, &renew); err != nil {
			return false, err
		}
		e, err := st.NextQueued(ctx, seq)
		if err != nil {
			return false, fmt.Errorf("look for compound message: %w", err)
		}
		if e == nil {
			return false, nil
		}
		if e.Window == r.j.ID {
			return true, nil
		}
		seq = e.Seq + 1
	}
	a.log.Warn("compound message not found within the search limit; storing it", "queue", r.j.Queue, "window", r.j.ID)
	return false, nil
}
