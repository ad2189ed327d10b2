package kvfollow

import (
	"testing"

	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// TestOwnWritesSkipOlderEchoes: the follower skips the late echoes older
// than this gateway's own write of a key (CI once read a cleared default
// list back full: the put's echo arrived after the purge), applies the
// write's own echo and everything after it, other gateways' writes
// included, and keeps no mark once a write is echoed.
func TestOwnWritesSkipOlderEchoes(t *testing.T) {
	f := &Follower{marks: map[string]mark{}}
	put := func(key string, rev uint64) kv.Entry {
		return kv.Entry{Key: key, Revision: rev, Op: kv.OpPut}
	}
	purge := func(key string, rev uint64) kv.Entry {
		return kv.Entry{Key: key, Revision: rev, Op: kv.OpPurge}
	}

	f.Wrote("a", 5)
	if !f.skip(put("a", 4)) {
		t.Fatal("an echo older than an own put was applied")
	}
	if f.skip(put("b", 4)) || f.skip(put("a", 5)) || f.skip(put("a", 6)) {
		t.Fatal("another key, the own put's echo or a later put was skipped")
	}

	f.Removing("a") // a purge, its revision unknown
	if !f.skip(put("a", 7)) {
		t.Fatal("a put older than an own purge was applied")
	}
	if f.skip(purge("a", 8)) || f.skip(put("a", 9)) {
		t.Fatal("the own purge's echo or a later put was skipped")
	}

	f.Wrote("c", 3) // echoed already (the follower saw revision 9)
	if len(f.marks) != 0 {
		t.Fatalf("marks left after their echoes: %v", f.marks)
	}
}
