package gateway

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// subjectCount is how many messages shard st holds on subject.
func subjectCount(t *testing.T, st jetstream.Stream, subject string) uint64 {
	t.Helper()
	info, err := st.Info(prioCtx(t), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// keeperSeq waits until the shard's keeper message is newer than after and
// returns its sequence.
func keeperSeq(t *testing.T, st jetstream.Stream, k int, after uint64) uint64 {
	t.Helper()
	deadline := time.Now().Add(msgWait)
	for {
		m, err := st.GetLastMsgForSubject(prioCtx(t), keeperSubject(k))
		if err == nil && m.Sequence > after {
			return m.Sequence
		}
		if time.Now().After(deadline) {
			t.Fatalf("keeper of shard %d not written after seq %d (last error %v)", k, after, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestShardKeeper: a shard stream made by a version without the keeper gets
// its subject on first use; pushes write the keeper, rolled up to one
// message, which no queue operation sees (listing, size, bytes), and two
// gateways pushing into one shard still leave one.
func TestShardKeeper(t *testing.T) {
	t.Parallel()
	ns, err := embedded.Start(embedded.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(context.Background()) })
	nc, err := ns.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const queue = "keep/q"
	k := mapping.Shard(queue)
	old := shardConfig(k, 1)
	old.Subjects = mapping.ShardSubjects(k) // as made before the keeper
	if _, err := js.CreateStream(prioCtx(t), old); err != nil {
		t.Fatal(err)
	}

	g1, err := New(context.Background(), nc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g1.Close)
	pushP(t, g1, queue, "a", -1)
	if got := pullOrder(t, g1, queue, 1); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("pulled %v", got)
	}
	st, err := js.Stream(prioCtx(t), mapping.ShardStream(k))
	if err != nil {
		t.Fatal(err)
	}
	if subjects := st.CachedInfo().Config.Subjects; !slices.Contains(subjects, keeperSubject(k)) {
		t.Fatalf("old shard not upgraded: subjects %v", subjects)
	}
	seq := keeperSeq(t, st, k, 0)

	// Another push, through a second gateway: the keeper is written again
	// (a push after the loop's pause), and the rollup leaves one.
	g2, err := New(context.Background(), nc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g2.Close)
	pushP(t, g2, queue, "b", -1)
	keeperSeq(t, st, k, seq)
	pullOrder(t, g2, queue, 1)
	if n := subjectCount(t, st, keeperSubject(k)); n != 1 {
		t.Fatalf("%d keeper messages, want 1 (rolled up)", n)
	}
	for _, g := range []*Gateway{g1, g2} {
		if names := g.QueueNames(); !slices.Equal(names, []string{queue}) {
			t.Errorf("queues %v, want [%s]", names, queue)
		}
		info, err := g.Queue(prioCtx(t), queue)
		if err != nil || info.Size != 0 || info.Bytes != 0 || info.Delayed != 0 || info.DeadLetters != 0 {
			t.Errorf("queue info %+v, %v; want empty", info, err)
		}
		all, err := g.QueueStatuses(prioCtx(t))
		if err != nil || len(all) != 1 || all[0].Size != 0 || all[0].Bytes != 0 {
			t.Errorf("statuses %+v, %v; want one empty queue", all, err)
		}
	}
	// The bytes estimate (a share of the shard's bytes by count) leaves the
	// keeper out: a lone message is counted about whole.
	body := strings.Repeat("c", 4000)
	pushP(t, g2, queue, body, -1)
	info, err := g2.Queue(prioCtx(t), queue)
	if err != nil || info.Size != 1 || info.Bytes < uint64(len(body)) || info.Bytes > uint64(len(body))+500 {
		t.Fatalf("queue info %+v, %v; want size 1 and about %d bytes", info, err, len(body))
	}
}
