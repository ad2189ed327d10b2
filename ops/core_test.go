package ops

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testcore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
)

// realCore starts an embedded nats-server and a core reporting to stats.
func realCore(t *testing.T, stats *Stats) *gateway.Gateway {
	t.Helper()
	ns := testnats.StartWith(t, embedded.Options{ServerName: "ops-test"})
	nc, err := ns.Connect("ops-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return testcore.New(t, nc, gateway.Config{Observer: stats})
}

// TestWithCore runs the observer, /stats, /metrics and readiness against a
// real core on JetStream.
func TestWithCore(t *testing.T) {
	stats := NewStats(StatsOptions{})
	core := realCore(t, stats)
	o := New(coreOf(core), stats, Options{StatsTTL: time.Nanosecond})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	for _, body := range []string{"one", "two", "three"} {
		if _, err := core.Messages().Push(ctx, "work", gateway.Message{Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := core.Messages().Pull(ctx, "work", time.Second)
	if err != nil || d == nil {
		t.Fatalf("pull: %v %v", d, err)
	}
	if err := core.Messages().Reply(ctx, "work", d.ID, gateway.Ack); err != nil {
		t.Fatal(err)
	}
	if d, err = core.Messages().Pull(ctx, "work", time.Second); err != nil || d == nil {
		t.Fatalf("pull: %v %v", d, err)
	}
	// The second delivery stays in flight.

	doc, err := o.Document(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, ok := doc.Queues["work"]
	if !ok {
		t.Fatalf("no queue in %+v", doc)
	}
	if q.Size != 2 || q.Memory == 0 || q.Stats.Push.Count != 3 || q.Stats.Pull.Count != 2 || q.Stats.Retention.N != 2 {
		t.Errorf("work: size %d memory %d push %d pull %d retention n %d", q.Size, q.Memory, q.Stats.Push.Count, q.Stats.Pull.Count, q.Stats.Retention.N)
	}
	if len(q.Nodes) != 1 || q.Nodes[0] != "ops-test" {
		t.Errorf("queue nodes %v, want the server", q.Nodes)
	}
	if strings.Join(doc.AllNodes, ",") != "ops-test" || strings.Join(doc.ActiveNodes, ",") != "ops-test" {
		t.Errorf("nodes %v %v", doc.ActiveNodes, doc.AllNodes)
	}
	var p map[string]any
	if err := json.Unmarshal(q.Props, &p); err != nil || p["retry"] != 2.0 {
		t.Errorf("props %s: %v", q.Props, err)
	}

	body := get(t, handler(o, nil), "/metrics").Body.String()
	for _, want := range []string{
		`lmq_queue_depth{queue="work"} 2`,
		`lmq_queue_in_flight{queue="work"} 1`,
		`lmq_pushes_total{queue="work"} 3`,
		`lmq_acks_total{queue="work"} 1`,
		`lmq_deliveries_in_flight 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	if err := o.Ready(ctx); err != nil {
		t.Errorf("ready: %v", err)
	}

	// ReleaseAll (gateway/releaseall.go) gives the in-flight delivery back
	// at once, without using up a retry.
	if n := core.Messages().ReleaseAll(ctx); n != 1 {
		t.Errorf("released %d, want 1", n)
	}
	if err := core.Messages().Reply(ctx, "work", d.ID, gateway.Ack); err == nil {
		t.Error("a released delivery still takes an ack")
	}
	var got []string
	for range 2 {
		d, err := core.Messages().Pull(ctx, "work", 0)
		if err != nil || d == nil {
			t.Fatalf("pull after release: %v %v", d, err)
		}
		got = append(got, string(d.Message.Body))
		if string(d.Message.Body) == "two" && d.RetryRemaining != 2 {
			t.Errorf("released message lost a retry: %d left", d.RetryRemaining)
		}
	}
	if strings.Join(got, ",") != "three,two" {
		t.Errorf("after release pulled %v, want three then the released two", got)
	}

	core.Close()
	if err := o.Ready(ctx); err == nil {
		t.Error("ready after the core closed")
	}
}
