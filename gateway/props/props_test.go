package props_test

import (
	"context"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/gateway/props"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/internal/testsignal"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// testCtx bounds a test's requests; reached only on failure.
func testCtx(t *testing.T) context.Context { return testnats.Context(t) }

// openPair opens two caches on one bucket of a fresh embedded server, as
// two gateways sharing a JetStream would; bApplied signals each entry b's
// follower applied.
func openPair(t *testing.T) (a, b *props.Cache, bApplied *testsignal.Signal[kv.Entry]) {
	t.Helper()
	ctx := testCtx(t)
	_, js := testnats.Client(t, "props-test")
	bkt, err := kv.Open(ctx, js, kv.Config{Bucket: mapping.PropsBucket, Description: "test", Replicas: 1, Create: kv.CreateOnce})
	if err != nil {
		t.Fatal(err)
	}
	open := func(context.Context) (*kv.KV, error) { return bkt, nil }
	a, b = props.New(open, nil), props.New(open, nil)
	for _, c := range []*props.Cache{a, b} {
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Stop)
	}
	bApplied = b.TestApplied()
	bApplied.Init(t)
	return a, b, bApplied
}

func parseProps(t *testing.T, s string) mapping.Props {
	t.Helper()
	p, err := mapping.ParseProps([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUpdateReadsOwnWriteAndSpreads: an update merges into the queue's own
// properties, reads back at once where it was made (no wait for the echo)
// and reaches the other cache through the bucket; Drop returns the queue
// to the defaults everywhere.
func TestUpdateReadsOwnWriteAndSpreads(t *testing.T) {
	a, b, bApplied := openPair(t)
	ctx := testCtx(t)
	if err := a.Update(ctx, "q1", parseProps(t, `{"retry":7}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, "q1", parseProps(t, `{"timeout":3}`)); err != nil {
		t.Fatal(err)
	}
	if e := a.Effective("q1"); e.Retry != 7 || e.Timeout != 3 {
		t.Fatalf("own write read back as %+v", e)
	}
	bApplied.WaitUntil("the other cache to follow the update", func() bool {
		e := b.Effective("q1")
		return e.Retry == 7 && e.Timeout == 3
	})
	own := a.Own("q1")
	if own.Retry == nil || *own.Retry != 7 || own.Accum != nil {
		t.Fatalf("Own: %+v", own)
	}
	*own.Retry = 99 // a copy: the cache must not see it
	if a.Effective("q2").Retry == 99 || *a.Own("q1").Retry != 7 {
		t.Fatal("Own handed out the cache's own values")
	}

	if err := a.Drop(ctx, "q1"); err != nil {
		t.Fatal(err)
	}
	def := mapping.Resolve(nil, "q1", mapping.Props{})
	if e := a.Effective("q1"); e.Retry != def.Retry {
		t.Fatalf("dropped properties still read: %+v", e)
	}
	bApplied.WaitUntil("the other cache to follow the drop", func() bool {
		return b.Effective("q1").Retry == def.Retry && b.Own("q1").Retry == nil
	})
	if err := a.Drop(ctx, "never-set"); err != nil {
		t.Fatalf("dropping nothing: %v", err)
	}
}

// TestDefaultsApplyAndClear: the default list applies to matching queues
// (own properties win), a queue resolved before a change is resolved again
// after it (the resolved cache never answers stale), and clearing the list
// clears it in both caches.
func TestDefaultsApplyAndClear(t *testing.T) {
	a, b, bApplied := openPair(t)
	ctx := testCtx(t)
	if err := a.Update(ctx, "job.own", parseProps(t, `{"retry":1}`)); err != nil {
		t.Fatal(err)
	}
	before := a.Effective("job.x") // resolved and cached before the list
	list, err := mapping.ParseDefaultList([]byte(`[["^job\\.", {"retry": 5}]]`))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetDefaults(ctx, list); err != nil {
		t.Fatal(err)
	}
	if e := a.Effective("job.x"); e.Retry != 5 || before.Retry == 5 {
		t.Fatalf("default not applied: before %+v, after %+v", before, e)
	}
	if e := a.Effective("job.own"); e.Retry != 1 {
		t.Fatalf("own properties lost to the default: %+v", e)
	}
	if e := a.Effective("other"); e.Retry != before.Retry {
		t.Fatalf("default applied to a queue it does not match: %+v", e)
	}
	bApplied.WaitUntil("the other cache to follow the default list", func() bool {
		return len(b.Defaults()) == 1 && b.Effective("job.x").Retry == 5
	})
	if err := a.SetDefaults(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if len(a.Defaults()) != 0 || a.Effective("job.x").Retry != before.Retry {
		t.Fatal("cleared default list still applies")
	}
	bApplied.WaitUntil("the other cache to follow the clear", func() bool {
		return len(b.Defaults()) == 0 && b.Effective("job.x").Retry == before.Retry
	})
}
