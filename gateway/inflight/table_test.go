package inflight

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway/waits"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// TestEntryStates walks an entry through its states: what each answer is
// from each state, and that a finished entry stays finished.
func TestEntryStates(t *testing.T) {
	now := time.Now()
	fired := make(chan struct{}, 1)
	arm := func(e *Entry) *Entry {
		e.Arm(time.Hour, func() { fired <- struct{}{} })
		return e
	}
	for _, tc := range []struct {
		name string
		run  func(e *Entry) bool
		want bool
		// finished: the entry's state afterwards.
		finished bool
	}{
		{"finish active", func(e *Entry) bool { return e.Finish() }, true, true},
		{"finish twice", func(e *Entry) bool { e.Finish(); return e.Finish() }, false, true},
		{"ack begins", func(e *Entry) bool { return e.BeginAck(now) }, true, false},
		{"no finish while acking", func(e *Entry) bool { e.BeginAck(now); return e.Finish() }, false, false},
		{"ack aborted, then finish", func(e *Entry) bool { e.BeginAck(now); e.AbortAck(now); return e.Finish() }, true, true},
		{"ack ended", func(e *Entry) bool { e.BeginAck(now); e.EndAck(); return e.Finished() }, true, true},
		{"no ack past deadline", func(e *Entry) bool { return e.BeginAck(now.Add(2 * time.Minute)) }, false, false},
		{"expired past deadline", func(e *Entry) bool { return e.Expired(now.Add(time.Minute)) }, true, false},
		{"extend moves deadline", func(e *Entry) bool {
			return e.Extend(now, 5*time.Minute) && !e.Expired(now.Add(4*time.Minute))
		}, true, false},
		{"no extend once finished", func(e *Entry) bool { e.Finish(); return e.Extend(now, time.Minute) }, false, true},
		{"abort reports expiry", func(e *Entry) bool { e.BeginAck(now); return e.AbortAck(now.Add(time.Hour)) }, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := arm(NewEntry("id", nil, waits.Client{}, now, now.Add(time.Minute)))
			if got := tc.run(e); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if got := e.Finished(); got != tc.finished {
				t.Errorf("finished %v, want %v", got, tc.finished)
			}
			e.stop(false)
		})
	}
	select {
	case <-fired:
		t.Error("a timer fired")
	default:
	}
}

func TestOwner(t *testing.T) {
	id := NewID([]byte{0xde, 0xad, 0xbe, 0xef})
	cid, owner, ok := Owner(strings.ToUpper(id))
	if !ok || owner != "deadbeef" || cid != id {
		t.Fatalf("Owner(%q) = %q, %q, %v", id, cid, owner, ok)
	}
	if _, _, ok := Owner("not-a-uuid"); ok {
		t.Fatal("Owner of no uuid: ok")
	}
	if err := NotFound("x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("NotFound: %v", err)
	}
	if !errors.Is(ErrAlreadyAcked, store.ErrNotFound) {
		t.Fatal("ErrAlreadyAcked does not wrap ErrNotFound")
	}
}

// TestBound: entries bound are given back on Release, those finished
// elsewhere are pruned as the set grows, and an Add after Release gives
// back at once.
func TestBound(t *testing.T) {
	now := time.Now()
	var given atomic.Int32
	b := NewBound(func(e *Entry) bool {
		if e.Finish() {
			given.Add(1)
			return true
		}
		return false
	}, slog.New(slog.DiscardHandler))
	var es []*Entry
	for i := range minPrune - 1 {
		e := NewEntry(NewID([]byte{0, 0, 0, byte(i)}), nil, waits.Client{}, now, now.Add(time.Hour))
		es = append(es, e)
		b.Add(e)
	}
	for _, e := range es[:10] {
		e.Finish() // answered on another connection
	}
	b.Add(NewEntry(NewID(nil), nil, waits.Client{}, now, now.Add(time.Hour))) // the 64th: prunes
	b.Done(es[10].ID)
	if got, want := b.Len(), minPrune-11; got != want {
		t.Fatalf("Len after prune %d, want %d", got, want)
	}
	if n := b.Release(context.Background()); n != minPrune-11 {
		t.Fatalf("Release gave back %d, want %d", n, minPrune-11)
	}
	late := NewEntry(NewID(nil), nil, waits.Client{}, now, now.Add(time.Hour))
	b.Add(late)
	if !late.Finished() || given.Load() != minPrune-10 {
		t.Fatalf("late Add: finished %v, given %d", late.Finished(), given.Load())
	}
}
