package ops

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// TestQueueControlMetrics: lmq_queue_paused follows the paused property and
// lmq_queue_deliveries_in_flight counts this gateway's deliveries of each
// queue, for every queue the inventory covers.
func TestQueueControlMetrics(t *testing.T) {
	stats := NewStats(StatsOptions{})
	core := realCore(t, stats)
	o := New(coreOf(core), stats, Options{StatsTTL: time.Nanosecond})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	for _, q := range []string{"busy", "held"} {
		for range 2 {
			if _, err := core.Messages().Push(ctx, q, gateway.Message{Body: []byte("m")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 2 {
		if d, err := core.Messages().Pull(ctx, "busy", time.Second); err != nil || d == nil {
			t.Fatalf("pull: %v %v", d, err)
		}
	}
	yes := true
	if err := core.Queues().UpdateProps(ctx, "held", mapping.Props{Paused: &yes}); err != nil {
		t.Fatal(err)
	}

	body := get(t, handler(o, nil), "/metrics").Body.String()
	for _, want := range []string{
		`lmq_queue_paused{queue="busy"} 0`,
		`lmq_queue_paused{queue="held"} 1`,
		`lmq_queue_deliveries_in_flight{queue="busy"} 2`,
		`lmq_queue_deliveries_in_flight{queue="held"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
