package kvfollow

import (
	"context"

	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// Own writes: a gateway applies its own writes to a followed bucket (the
// registry, properties, tokens) to its mirror at once, so that its next
// read sees them; the follower applies them again when their echo arrives,
// and it lags. Without more, the late echo of an older write could undo a
// newer one for a moment: a cleared default list read back full (seen in
// CI), a revoked token valid again, a deleted queue known again. So the
// follower remembers this gateway's writes it has not echoed yet and skips
// the older entries of their keys:
//   - a put at revision R: entries of the key older than R are skipped;
//   - a delete or purge (whose revision kv.KV does not return): marked
//     before it is written, then every put of the key is skipped until a
//     delete or purge of it arrives, which is ours or a later one (the
//     bucket delivers in order). A delete that fails drops the mark and
//     reads the key back.

// mark is an own write of a key not yet echoed by the follower.
type mark struct {
	rev      uint64 // a put's revision
	removing bool   // a delete or purge
}

// skip tells whether the follower must not apply e (older than an own
// write of its key), and ends the key's mark once its write is echoed.
func (f *Follower) skip(e kv.Entry) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = max(f.applied, e.Revision)
	m, ok := f.marks[e.Key]
	switch {
	case !ok:
		return false
	case m.removing:
		if e.Op == kv.OpPut {
			return true
		}
	case e.Revision < m.rev:
		return true
	}
	delete(f.marks, e.Key)
	return false
}

// Wrote notes this gateway's put of key at revision rev, already applied to
// its mirror.
func (f *Follower) Wrote(key string, rev uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rev <= f.applied {
		return // echoed already: nothing older can come
	}
	if m, ok := f.marks[key]; !ok || !m.removing && m.rev < rev {
		f.marks[key] = mark{rev: rev}
	}
}

// Removing marks key before this gateway deletes or purges it; call the
// function it returns with the outcome. After a failure the key is read
// back and applied, since the mark may have skipped a put meanwhile.
func (f *Follower) Removing(key string) (done func(ctx context.Context, ok bool)) {
	f.mu.Lock()
	f.marks[key] = mark{removing: true}
	f.mu.Unlock()
	return func(ctx context.Context, ok bool) {
		if ok {
			return
		}
		f.mu.Lock()
		delete(f.marks, key)
		f.mu.Unlock()
		if e, err := f.kv.Get(ctx, key); err == nil {
			f.apply(e)
		}
	}
}
