package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/testnats"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// TestStreamDescriptionNamesQueue: `nats stream ls` shows a stream's
// description, so it names the queue; a stream made by an older version
// (description "lmq queue") gets the new description when a gateway opens
// it, and a very long name is cut.
func TestStreamDescriptionNamesQueue(t *testing.T) {
	t.Parallel()
	ns, g := startCore(t, context.Background())
	ctx := ctxT(t)
	nc := testnats.Connect(t, ns, "inspect")
	js := testnats.JetStream(t, nc)

	old := "sensor/old"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:              mapping.StreamName(old),
		Description:       "lmq queue",
		Subjects:          mapping.StreamSubjects(old),
		Retention:         jetstream.WorkQueuePolicy,
		Storage:           jetstream.FileStorage,
		Metadata:          map[string]string{mapping.MetaQueueName: old},
		AllowMsgTTL:       true,
		AllowMsgSchedules: true,
		AllowRollup:       true,
	}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", 20) + strings.Repeat("a", 200) // 220 runes, 240 bytes
	want := map[string]string{
		"sensor/42": `lmq queue "sensor/42"`,
		old:         `lmq queue "sensor/old"`,
		long:        `lmq queue "` + strings.Repeat("é", 20) + strings.Repeat("a", 108) + `"…`,
	}
	for q, desc := range want {
		mustPush(t, g, q, "x")
		st, err := js.Stream(ctx, mapping.StreamName(q))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.CachedInfo().Config.Description; got != desc {
			t.Errorf("queue %.20q: description %.40q, want %.40q", q, got, desc)
		}
	}
	// The upgraded stream kept its message and still serves it.
	if d := mustPull(t, g, "sensor/old", 0); string(d.Message.Body) != "x" {
		t.Fatalf("pulled %q from the upgraded queue", d.Message.Body)
	}
}
