package accumulator

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// deadOwner is the id of a gateway that does not exist (nobody answers on
// its liveness subject).
const deadOwner = "deadbeef"

// startDeadJob creates, for the queue's open window, the close job of a
// gateway that died right after it removed the window's pointer.
func startDeadJob(t *testing.T, g *gw, queue string) (*jobRef, window, uint64) {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	enc := mapping.EncodeName(queue)
	cur, err := g.acc.read(ctx, ptrKey(enc))
	if err != nil || !cur.live {
		t.Fatalf("no open window: %v", err)
	}
	var w window
	if err := json.Unmarshal(cur.value, &w); err != nil {
		t.Fatal(err)
	}
	r := &jobRef{key: jobKey(enc, w.ID), enc: enc,
		j: job{window: w, State: stClosing, Owner: deadOwner, Lease: time.Now().Add(time.Hour).UnixNano()}}
	b, _ := json.Marshal(r.j)
	if r.rev, err = g.acc.kv.Update(ctx, r.key, b, 0); err != nil {
		t.Fatal(err)
	}
	if err := g.acc.fence(ctx, r); err != nil {
		t.Fatal(err)
	}
	return r, w, cur.rev
}

// storePart stores a part tagged with w, as a push that read the pointer
// before the fence would.
func storePart(t *testing.T, g *gw, w window, body string) uint64 {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	part, err := g.core.Parts().EncodePart(ctx, w.Queue, gateway.Message{Body: []byte(body)}, w.Retry)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.core.Parts().StorePart(ctx, part, w.ID); err != nil {
		t.Fatal(err)
	}
	return part.Seq
}

// A push that stored its part while the window was being closed: before the
// cut is fixed it fixes the cut itself and is in; after the cut it is out,
// its part removed. The job of the dead runner is taken over and yields the
// window's parts up to the cut, once.
func TestCutAndTakeover(t *testing.T) {
	t.Parallel()
	const q = "acc/cut"
	_, g := startAccumQueue(t, t.TempDir(), q, 3600, 2)
	push(t, g, q, "a")
	r, w, ptrRev := startDeadJob(t, g, q)
	ctx := ctxT(t, 20*time.Second)

	sb := storePart(t, g, w, "b")
	in, err := g.acc.confirm(ctx, r.enc, &w, ptrRev, sb)
	if err != nil || !in {
		t.Fatalf("part stored before the cut: in=%v err=%v", in, err)
	}
	j, _, ok, err := g.acc.readJob(ctx, r.key)
	if err != nil || !ok || j.Cut == nil || *j.Cut < sb {
		t.Fatalf("cut not fixed by the push: %+v %v", j, err)
	}
	sc := storePart(t, g, w, "c")
	in, err = g.acc.confirm(ctx, r.enc, &w, ptrRev, sc)
	if err != nil || in {
		t.Fatalf("part stored after the cut: in=%v err=%v", in, err)
	}
	if stored, err := g.acc.partStored(ctx, q, sc); err != nil || stored {
		t.Fatalf("part after the cut not removed: %v %v", stored, err)
	}
	// The pointer is gone: the next push opens a new window at once.
	if st := push(t, g, q, "d"); st != gateway.AccumNew {
		t.Fatalf("push during the close: %v", st)
	}
	d := pull(t, g, q, 10*time.Second) // after checkDelay, the takeover
	if d == nil || !slices.Equal(bodies(d), []string{"a", "b"}) {
		t.Fatalf("compound: %+v", d)
	}
	settled(t, g, ptrKey(r.enc)) // the new window's pointer stays
	if d := pull(t, g, q, 0); d != nil {
		t.Fatalf("second compound: %q", bodies(d))
	}
	wantLeft(t, g, q, 1, ptrKey(r.enc)) // d's part and the new window's pointer
}

// A runner that died after storing the compound but before recording it:
// the run that takes over finds the compound and does not store another.
func TestResumeAfterCompoundStored(t *testing.T) {
	t.Parallel()
	const q = "acc/resume"
	_, g := startAccumQueue(t, t.TempDir(), q, 3600, 2)
	push(t, g, q, "a")
	push(t, g, q, "b")
	r, _, _ := startDeadJob(t, g, q)
	ctx := ctxT(t, 20*time.Second)

	st, err := g.core.Logs().QueueLog(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	last := st.LastSeq()
	r.j.Cut, r.j.LQ, r.j.State = &last, last, stPublishing
	b, _ := json.Marshal(r.j)
	if r.rev, err = g.acc.kv.Update(ctx, r.key, b, r.rev); err != nil {
		t.Fatal(err)
	}
	parts, err := g.acc.scan(ctx, st, r, true)
	if err != nil || len(parts.of) != 2 {
		t.Fatalf("scan: %+v, %v", parts, err)
	}
	if err := g.acc.publish(ctx, r, parts.of); err != nil {
		t.Fatal(err)
	}
	// Wait for the takeover to finish the job.
	testwait.For(t, "the job finished", func() bool {
		_, _, ok, err := g.acc.readJob(ctx, r.key)
		if err != nil {
			t.Fatal(err)
		}
		return !ok
	})
	if d := pull(t, g, q, time.Second); d == nil || !slices.Equal(bodies(d), []string{"a", "b"}) {
		t.Fatalf("compound: %+v", d)
	}
	settled(t, g)
	if d := pull(t, g, q, 0); d != nil {
		t.Fatalf("compound stored twice: %q", bodies(d))
	}
	wantLeft(t, g, q, 0)
}

// Deleting a queue with an open window: the window's close finds no stream
// and just ends.
func TestDeleteQueueWithOpenWindow(t *testing.T) {
	t.Parallel()
	const q = "acc/deleted"
	_, g := startAccumQueue(t, t.TempDir(), q, 0.2, 2)
	push(t, g, q, "a")
	if err := g.core.Queues().DeleteQueue(ctxT(t, 5*time.Second), q); err != nil {
		t.Fatal(err)
	}
	// The window (0.2s) closes, finds no stream and removes its keys.
	testwait.ForDetail(t, "the window's keys removed", func() (bool, string) {
		keys, err := g.acc.kv.Keys(ctxT(t, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return len(keys) == 0, fmt.Sprintf("keys %q", keys)
	})
}

// A gateway stopped between creating a window's close job and removing its
// pointer, and the window fell due long before the restart: the restarted
// gateway sees both, the overdue pointer first. Its election finds the job
// and must take it over rather than wait for the job's own turn, which a
// close of the window under way (its own) would put off again and again.
func TestOverdueWindowWithJobAtRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const q = "acc/overdue"
	ns, g := startAccumQueue(t, dir, q, 3600, 2)
	push(t, g, q, "a")
	push(t, g, q, "b")
	g.close()

	// What the stopped gateway left, written with a connection of its own:
	// the job of a dead runner, and the pointer still there, overdue.
	ctx := ctxT(t, 10*time.Second)
	kv := accumKV(t, ctx, ns)
	enc := mapping.EncodeName(q)
	w := makeOverdueKey(t, ctx, kv, ptrKey(enc))
	j := job{window: w, State: stClosing, Owner: deadOwner, Lease: time.Now().Add(time.Hour).UnixNano()}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, jobKey(enc, w.ID), b); err != nil {
		t.Fatal(err)
	}

	g = startGW(t, ns)
	d := pull(t, g, q, 20*time.Second)
	if d == nil || !slices.Equal(bodies(d), []string{"a", "b"}) {
		t.Fatalf("compound: %+v", d)
	}
	settled(t, g)
	if d := pull(t, g, q, 0); d != nil {
		t.Fatalf("second compound: %q", bodies(d))
	}
}

// Purging a queue with an open window (Gateway.Purge removes its parts):
// the window stays open, takes the pushes that follow, and its compound
// holds only those; nothing of the purged parts is stored.
func TestPurgeWithOpenWindow(t *testing.T) {
	t.Parallel()
	const q = "acc/purged"
	_, g := startAccumQueue(t, t.TempDir(), q, 1, 2)
	if st := push(t, g, q, "a"); st != gateway.AccumNew {
		t.Fatalf("first push: %v", st)
	}
	push(t, g, q, "b")
	if err := g.core.Queues().Purge(ctxT(t, 5*time.Second), q); err != nil {
		t.Fatal(err)
	}
	push(t, g, q, "c") // joins the window, or opens one if it closed already
	d := pull(t, g, q, 10*time.Second)
	if d == nil || !slices.Equal(bodies(d), []string{"c"}) {
		t.Fatalf("compound after the purge: %+v", d)
	}
	settled(t, g)
	if d := pull(t, g, q, 0); d != nil {
		t.Fatalf("another compound: %q", bodies(d))
	}
	wantLeft(t, g, q, 0)
}
