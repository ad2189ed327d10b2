package store

import (
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestShardInfoConverts: a stream info's state, subjects, answer time and
// placement come over as they were; a replica JetStream left nil is
// skipped, a leader without a start time has a zero LeaderSince, and a
// stream outside a cluster has no Cluster.
func TestShardInfoConverts(t *testing.T) {
	now := time.Now()
	since := now.Add(-time.Minute)
	subjects := map[string]uint64{"a": 1}
	got := shardInfo(&jetstream.StreamInfo{
		TimeStamp: now,
		State:     jetstream.StreamState{Msgs: 3, Bytes: 30, Consumers: 2, Subjects: subjects},
		Cluster: &jetstream.ClusterInfo{Leader: "n1", LeaderSince: &since, Replicas: []*jetstream.PeerInfo{
			{Name: "n2", Current: true, Offline: true, Active: time.Second},
			nil,
		}},
	})
	want := &ShardInfo{Msgs: 3, Bytes: 30, Consumers: 2, Subjects: subjects, At: now,
		Cluster: &Cluster{Leader: "n1", LeaderSince: since, Replicas: []Replica{{Name: "n2", Current: true, Offline: true, Active: time.Second}}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := shardInfo(&jetstream.StreamInfo{Cluster: &jetstream.ClusterInfo{Leader: "n1"}}); !got.Cluster.LeaderSince.IsZero() {
		t.Fatalf("LeaderSince %v, want zero", got.Cluster.LeaderSince)
	}
	if got := shardInfo(&jetstream.StreamInfo{}); got.Cluster != nil {
		t.Fatalf("no cluster: %+v", got.Cluster)
	}
}
