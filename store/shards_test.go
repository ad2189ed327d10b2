package store_test

import (
	"time"

	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// TestShardUpgradesDuplicateWindow: a shard stream made by an older version
// (JetStream's default duplicate window, 2 minutes, none of the later
// settings) is brought up to DuplicateWindow, SQS's 5 minutes, on first use;
// a longer window an operator set is kept.
func TestShardUpgradesDuplicateWindow(t *testing.T) {
	f := newFixture(t, store.Config{})
	ctx := testCtx(t)
	old := func(k int, dups int64) {
		t.Helper()
		if _, err := f.js.CreateStream(ctx, jetstream.StreamConfig{
			Name:       mapping.ShardStream(k),
			Subjects:   mapping.ShardSubjects(k),
			Retention:  jetstream.WorkQueuePolicy,
			Storage:    jetstream.FileStorage,
			Duplicates: time.Duration(dups),
		}); err != nil {
			t.Fatal(err)
		}
	}
	old(1, 0)
	old(2, int64(store.DuplicateWindow)*2)
	for k, want := range map[int]int64{1: int64(store.DuplicateWindow), 2: int64(store.DuplicateWindow) * 2} {
		if _, err := f.s.Shards().Shard(ctx, k); err != nil {
			t.Fatal(err)
		}
		st, err := f.js.Stream(ctx, mapping.ShardStream(k))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.CachedInfo().Config; int64(got.Duplicates) != want || !got.AllowMsgTTL {
			t.Errorf("shard %d: duplicate window %v (TTL allowed %v), want %v", k, got.Duplicates, got.AllowMsgTTL, want)
		}
	}
	// A shard made by this version has it from the start.
	if _, err := f.s.Shards().Shard(ctx, 3); err != nil {
		t.Fatal(err)
	}
	st, err := f.js.Stream(ctx, mapping.ShardStream(3))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.Duplicates; got != store.DuplicateWindow {
		t.Errorf("new shard: duplicate window %v, want %v", got, store.DuplicateWindow)
	}
}
