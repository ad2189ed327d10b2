package gateway_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// TestQueueMeta: CreateQueue records the creation time; UpdateQueueMeta
// changes tags and attributes (Modified follows), concurrent updates from
// two gateways all land (revision CAS); bounds answer ErrInvalid; a stored
// record that is not one reads as none; DeleteQueue removes the record; an
// unknown queue is ErrNotFound.
func TestQueueMeta(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	ns, _, a := startCoreWith(t, gateway.Config{})
	nc := testnats.Connect(t, ns, "second")
	b, err := gateway.New(ctx, bus.New(nc), gateway.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)

	if _, err := a.Queues().QueueMeta(ctx, "meta"); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("unknown queue: %v, want ErrNotFound", err)
	}
	if err := a.Queues().UpdateQueueMeta(ctx, "meta", func(*gateway.QueueMeta) {}); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("update of an unknown queue: %v, want ErrNotFound", err)
	}
	// A queue made by a push has none, and LMQ_META need not exist.
	mustPush(t, a, "pushed", "x")
	if m, err := a.Queues().QueueMeta(ctx, "pushed"); err != nil || !m.Created.IsZero() || m.Tags != nil {
		t.Fatalf("queue made by a push: %+v %v", m, err)
	}

	before := time.Now()
	if created, err := a.Queues().CreateQueue(ctx, "meta"); !created || err != nil {
		t.Fatalf("CreateQueue: %v %v", created, err)
	}
	m, err := b.Queues().QueueMeta(ctx, "meta")
	if err != nil || m.Created.Before(before.Add(-time.Second)) || !m.Modified.Equal(m.Created) {
		t.Fatalf("after CreateQueue: %+v %v", m, err)
	}
	created := m.Created

	// Ten updates through each gateway at once, each adding a tag.
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		g := a
		if i%2 == 1 {
			g = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- g.Queues().UpdateQueueMeta(ctx, "meta", func(m *gateway.QueueMeta) {
				m.Tags[fmt.Sprint("t", i)] = fmt.Sprint(i)
				m.Attrs["DelaySeconds"] = "5"
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	m, err = a.Queues().QueueMeta(ctx, "meta")
	if err != nil || len(m.Tags) != 20 || m.Tags["t7"] != "7" || m.Attrs["DelaySeconds"] != "5" ||
		!m.Created.Equal(created) || m.Modified.Before(created) {
		t.Fatalf("after 20 updates: %+v %v", m, err)
	}

	// Bounds: nothing is written.
	for name, fn := range map[string]func(*gateway.QueueMeta){
		"too many tags": func(m *gateway.QueueMeta) {
			for i := range gateway.MaxQueueTags + 1 {
				m.Tags[fmt.Sprint("k", i)] = "v"
			}
		},
		"too many attributes": func(m *gateway.QueueMeta) {
			for i := range gateway.MaxQueueAttrs + 1 {
				m.Attrs[fmt.Sprint("k", i)] = "v"
			}
		},
		"too large": func(m *gateway.QueueMeta) { m.Attrs["Policy"] = strings.Repeat("x", gateway.MaxQueueMetaLen) },
		"empty key": func(m *gateway.QueueMeta) { m.Tags[""] = "v" },
		"not UTF-8": func(m *gateway.QueueMeta) { m.Tags["k"] = "\xff" },
	} {
		if err := a.Queues().UpdateQueueMeta(ctx, "meta", fn); !errors.Is(err, gateway.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if m2, err := a.Queues().QueueMeta(ctx, "meta"); err != nil || len(m2.Tags) != 20 || len(m2.Attrs) != 1 {
		t.Fatalf("after refused updates: %+v %v", m2, err)
	}

	// What is stored is input: a record that is not one reads as none, and
	// the next update replaces it.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, mapping.MetaBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, mapping.MetaKeyPrefix+mapping.EncodeName("meta"), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if m, err := a.Queues().QueueMeta(ctx, "meta"); err != nil || !m.Created.IsZero() || len(m.Tags) != 0 {
		t.Fatalf("unreadable record: %+v %v", m, err)
	}
	if err := a.Queues().UpdateQueueMeta(ctx, "meta", func(m *gateway.QueueMeta) { m.Tags["env"] = "test" }); err != nil {
		t.Fatal(err)
	}
	if m, err := a.Queues().QueueMeta(ctx, "meta"); err != nil || m.Created.IsZero() || len(m.Tags) != 1 {
		t.Fatalf("record replaced: %+v %v", m, err)
	}

	// Deleting the queue deletes its metadata: made again, it starts anew.
	if err := b.Queues().DeleteQueue(ctx, "meta"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, mapping.MetaKeyPrefix+mapping.EncodeName("meta")); err == nil {
		t.Fatal("record left after DeleteQueue")
	}
	if again, err := b.Queues().CreateQueue(ctx, "meta"); !again || err != nil {
		t.Fatalf("CreateQueue again: %v %v", again, err)
	}
	if m, err := a.Queues().QueueMeta(ctx, "meta"); err != nil || len(m.Tags) != 0 || !m.Created.After(created) {
		t.Fatalf("made again: %+v %v", m, err)
	}
}
