package view

import (
	"reflect"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// TestAddCountsByKind: a shard's subject counts add up per queue by kind
// (priorities count as deliverable), and subjects that are not a queue's
// are ignored.
func TestAddCountsByKind(t *testing.T) {
	subjects := map[string]uint64{
		mapping.QueueSubject("a"):          3,
		mapping.PrioritySubject("a", 2):    2,
		mapping.DeadSubject("a"):           1,
		mapping.PartSubject("a"):           4,
		mapping.ScheduleSubject("a", "id"): 5,
		mapping.QueueSubject("b"):          7,
		"not.a.queue":                      9,
	}
	got := make(map[string]*QueueInfo)
	addCounts(got, subjects)
	want := map[string]*QueueInfo{
		mapping.EncodeName("a"): {Size: 5, DeadLetters: 1, Parts: 4, Delayed: 5},
		mapping.EncodeName("b"): {Size: 7},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("addCounts: got %v, want %v", got, want)
	}
}

// TestShareOf: a queue's bytes are its share of its stream's by message
// count, never more than the stream holds, zero for none.
func TestShareOf(t *testing.T) {
	st := &store.ShardInfo{Msgs: 10, Bytes: 1000}
	for _, c := range []struct{ msgs, want uint64 }{{0, 0}, {1, 100}, {10, 1000}, {20, 1000}} {
		if got := shareOf(st, c.msgs); got != c.want {
			t.Errorf("shareOf(%d): %d, want %d", c.msgs, got, c.want)
		}
	}
	if got := shareOf(&store.ShardInfo{}, 5); got != 0 {
		t.Errorf("shareOf of an empty stream: %d", got)
	}
}

// TestPlacement: the leader comes first and is current; a replica is
// current while up to date and heard from within ReplicaSilence; one not
// heard from for longer is silent, and so is one never heard from by a
// leader that has led longer than ReplicaSilence (but not by a new leader,
// which has no time to give yet). Outside a cluster the lists are empty.
func TestPlacement(t *testing.T) {
	nodes, current, silent := placement(&store.ShardInfo{})
	if len(nodes) != 0 || len(current) != 0 || silent != nil || nodes == nil || current == nil {
		t.Fatalf("no cluster: %q %q %q", nodes, current, silent)
	}
	now := time.Now()
	info := func(led time.Duration) *store.ShardInfo {
		return &store.ShardInfo{
			At: now,
			Cluster: &store.Cluster{Leader: "n1", LeaderSince: now.Add(-led), Replicas: []store.Replica{
				{Name: "n2", Current: true, Active: time.Second},
				{Name: "n3", Current: true, Active: 2 * ReplicaSilence},
				{Name: "n4"}, // never heard from
			}},
		}
	}
	nodes, current, silent = placement(info(time.Minute))
	if want := []string{"n1", "n2", "n3", "n4"}; !reflect.DeepEqual(nodes, want) {
		t.Fatalf("nodes %q, want %q", nodes, want)
	}
	if want := []string{"n1", "n2"}; !reflect.DeepEqual(current, want) {
		t.Fatalf("current %q, want %q", current, want)
	}
	if want := []string{"n3", "n4"}; !reflect.DeepEqual(silent, want) {
		t.Fatalf("silent %q, want %q", silent, want)
	}
	if _, _, silent = placement(info(time.Second)); !reflect.DeepEqual(silent, []string{"n3"}) {
		t.Fatalf("a new leader's silent %q, want only n3", silent)
	}
}
