package kv_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/jsapi"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/store"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// testCtx bounds a test's requests; reached only on failure.
func testCtx(t *testing.T) context.Context { return testnats.Context(t) }

// fixture is a JetStream on a fresh embedded server.
type fixture struct{ js jetstream.JetStream }

func newFixture(t *testing.T) *fixture {
	t.Helper()
	_, js := testnats.Client(t, "kv-test")
	return &fixture{js: js}
}

// openKV opens (creating it) the bucket name on f's server.
func (f *fixture) openKV(t *testing.T, name string) *kv.KV {
	t.Helper()
	bkt, err := kv.Open(testCtx(t), f.js, kv.Config{Bucket: name, Create: kv.CreateOnce, MarkerTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return bkt
}

// description is the description of bucket's stream, as the server has it.
func (f *fixture) description(t *testing.T, bucket string) string {
	t.Helper()
	ctx := testCtx(t)
	st, err := f.js.Stream(ctx, jsapi.KVStream(bucket))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.Config.Description
}

// TestOpenKV: a bucket that must exist is not made; one made once keeps
// its first creator's config (a gateway started with other settings does
// not change it under the others); CreateOrUpdate brings it to its own.
func TestOpenKV(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := testCtx(t)
	const b = "T_OPEN"
	for _, tc := range []struct {
		name    string
		cfg     kv.Config
		wantErr error
		desc    string // the stream's description afterwards
	}{
		{"existing, missing", kv.Config{Bucket: b, Description: "x"}, kv.ErrBucketNotFound, ""},
		{"create once", kv.Config{Bucket: b, Description: "first", Create: kv.CreateOnce}, nil, "first"},
		{"create once again", kv.Config{Bucket: b, Description: "second", Create: kv.CreateOnce}, nil, "first"},
		{"existing", kv.Config{Bucket: b, Description: "third"}, nil, "first"},
		{"create or update", kv.Config{Bucket: b, Description: "fourth", Create: kv.CreateOrUpdate, MarkerTTL: time.Minute}, nil, "fourth"},
	} {
		bkt, err := kv.Open(ctx, f.js, tc.cfg)
		if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
			t.Fatalf("%s: OpenKV: %v, want %v", tc.name, err, tc.wantErr)
		}
		if err != nil {
			continue
		}
		if bkt.Bucket() != b {
			t.Fatalf("%s: Bucket() = %q", tc.name, bkt.Bucket())
		}
		if got := f.description(t, b); got != tc.desc {
			t.Fatalf("%s: description %q, want %q", tc.name, got, tc.desc)
		}
	}
}

// TestKVOperations: each operation's outcome, in a sequence on one bucket,
// and the errors its callers tell apart: a missing key, a key that exists
// (Create), a revision that changed (Update, conditional removals). None of
// them reads as a missing queue: Classify makes them unavailable, as it
// did the nats.go errors they replace.
func TestKVOperations(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := testCtx(t)
	bkt := f.openKV(t, "T_OPS")
	rev := map[string]uint64{} // each key's revision, as the last write returned it
	wrote := func(key string) func(uint64, error) error {
		return func(r uint64, err error) error {
			if err == nil {
				if r <= rev[key] {
					return errors.New("the revision did not grow")
				}
				rev[key] = r
			}
			return err
		}
	}
	latest := func(key string, op kv.Op, value string) error {
		e, err := bkt.Latest(ctx, key)
		if err != nil {
			return err
		}
		if e.Op != op || string(e.Value) != value || e.Key != key {
			return errors.New("latest: " + e.Key + " " + e.Op.String() + " " + string(e.Value))
		}
		return nil
	}
	get := func(key, value string) error {
		e, err := bkt.Get(ctx, key)
		if err != nil {
			return err
		}
		if e.Op != kv.OpPut || string(e.Value) != value || e.Revision != rev[key] {
			return errors.New("get: " + e.Op.String() + " " + string(e.Value))
		}
		return nil
	}
	for _, tc := range []struct {
		name string
		do   func() error
		want error // nil: success
	}{
		{"get a key never written", func() error { return get("a", "") }, kv.ErrKeyNotFound},
		{"latest of a key never written", func() error { return latest("a", kv.OpPut, "") }, kv.ErrKeyNotFound},
		{"create", func() error { return wrote("a")(bkt.Create(ctx, "a", []byte("1"))) }, nil},
		{"get", func() error { return get("a", "1") }, nil},
		{"create over a value", func() error { _, err := bkt.Create(ctx, "a", []byte("x")); return err }, kv.ErrKeyExists},
		{"update at 0 over a value", func() error { _, err := bkt.Update(ctx, "a", []byte("x"), 0); return err }, kv.ErrRevisionMismatch},
		{"update at a later revision", func() error { _, err := bkt.Update(ctx, "a", []byte("x"), rev["a"]+100); return err }, kv.ErrRevisionMismatch},
		{"update", func() error { return wrote("a")(bkt.Update(ctx, "a", []byte("2"), rev["a"])) }, nil},
		{"update at the revision before", func() error { _, err := bkt.Update(ctx, "a", []byte("x"), rev["a"]-1); return err }, kv.ErrRevisionMismatch},
		{"latest", func() error { return latest("a", kv.OpPut, "2") }, nil},
		{"delete at the revision before", func() error { return bkt.Delete(ctx, "a", kv.LastRevision(rev["a"]-1)) }, kv.ErrRevisionMismatch},
		{"get after a refused delete", func() error { return get("a", "2") }, nil},
		{"delete", func() error { return bkt.Delete(ctx, "a", kv.LastRevision(rev["a"])) }, nil},
		{"get after delete", func() error { return get("a", "") }, kv.ErrKeyNotFound},
		{"latest is the delete's marker", func() error { return latest("a", kv.OpDelete, "") }, nil},
		{"create over the marker", func() error { return wrote("a")(bkt.Create(ctx, "a", []byte("3"))) }, nil},
		{"get after create", func() error { return get("a", "3") }, nil},
		{"put", func() error { return wrote("b")(bkt.Put(ctx, "b", []byte("1"))) }, nil},
		{"put over a value", func() error { return wrote("b")(bkt.Put(ctx, "b", []byte("2"))) }, nil},
		{"purge at the revision before", func() error { return bkt.Purge(ctx, "b", kv.LastRevision(rev["b"]-1)) }, kv.ErrRevisionMismatch},
		{"purge with an expiring marker", func() error {
			return bkt.Purge(ctx, "b", kv.LastRevision(rev["b"]), kv.MarkerTTL(time.Minute))
		}, nil},
		{"get after purge", func() error { return get("b", "") }, kv.ErrKeyNotFound},
		{"latest is the purge's marker", func() error { return latest("b", kv.OpPurge, "") }, nil},
		{"purge a key never written", func() error { return bkt.Purge(ctx, "c") }, nil},
		{"delete a key never written", func() error { return bkt.Delete(ctx, "d") }, nil},
		{"get a key only purged", func() error { return get("c", "") }, kv.ErrKeyNotFound},
	} {
		err := tc.do()
		if tc.want == nil {
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
		for _, other := range []error{kv.ErrKeyNotFound, kv.ErrKeyExists, kv.ErrRevisionMismatch, kv.ErrNoLeader} {
			if other != tc.want && errors.Is(err, other) {
				t.Fatalf("%s: %v is also %v", tc.name, err, other)
			}
		}
		if c := store.Classify("op", err); !errors.Is(c, store.ErrUnavailable) || errors.Is(c, store.ErrNotFound) {
			t.Fatalf("%s: Classify(%v) = %v, want unavailable", tc.name, err, c)
		}
	}
}

// TestKVKeys: the keys holding a value, by filter, sorted; removed keys
// are not listed, and no match is an empty list.
func TestKVKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := testCtx(t)
	bkt := f.openKV(t, "T_KEYS")
	for _, k := range []string{"j.b.2", "w.a", "j.a.1", "j.c.3"} {
		if _, err := bkt.Put(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bkt.Put(ctx, "j.a.1", []byte("again")); err != nil {
		t.Fatal(err)
	}
	if err := bkt.Delete(ctx, "j.c.3"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		filters []string
		want    []string
	}{
		{nil, []string{"j.a.1", "j.b.2", "w.a"}},
		{[]string{"j.>"}, []string{"j.a.1", "j.b.2"}},
		{[]string{"w.>", "j.b.*"}, []string{"j.b.2", "w.a"}},
		{[]string{"x.>"}, nil},
	} {
		filters := slices.Clone(tc.filters)
		got, err := bkt.Keys(ctx, filters...)
		if err != nil {
			t.Fatalf("Keys(%v): %v", tc.filters, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Fatalf("Keys(%v) = %v, want %v", tc.filters, got, tc.want)
		}
		if !slices.Equal(filters, tc.filters) {
			t.Fatalf("Keys changed its filters: %v", filters)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := bkt.Keys(cctx); err == nil {
		t.Fatal("a listing with a cancelled context answered")
	}
}

// next is the watcher's next entry (nil: the end of the current values);
// it fails the test when none comes or the watcher closed.
func next(t *testing.T, w *kv.Watcher) *kv.Entry {
	t.Helper()
	select {
	case e, ok := <-w.Updates():
		if !ok {
			t.Fatal("the watcher closed")
		}
		return e
	case <-testCtx(t).Done():
		t.Fatal("no entry from the watcher")
	}
	return nil
}

// TestKVWatch: a watch replays the latest entry of each matching key,
// markers included, marks the end of the replay, then hands over every
// later write of a matching key with its operation, and none of the
// others; Stop closes its channel.
func TestKVWatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := testCtx(t)
	bkt := f.openKV(t, "T_WATCH")
	r1, err := bkt.Put(ctx, "w.a", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bkt.Put(ctx, "w.b", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := bkt.Delete(ctx, "w.b"); err != nil {
		t.Fatal(err)
	}
	if _, err := bkt.Put(ctx, "x.a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	w, err := bkt.Watch(ctx, "w.>")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	type seen struct {
		key, value string
		op         kv.Op
	}
	var replay []seen
	for e := next(t, w); e != nil; e = next(t, w) {
		replay = append(replay, seen{e.Key, string(e.Value), e.Op})
		if e.Key == "w.a" && (e.Revision != r1 || e.Created.IsZero()) {
			t.Fatalf("w.a replayed at revision %d created %v, want %d", e.Revision, e.Created, r1)
		}
	}
	if want := []seen{{"w.a", "1", kv.OpPut}, {"w.b", "", kv.OpDelete}}; !slices.Equal(replay, want) {
		t.Fatalf("replay %v, want %v", replay, want)
	}

	if _, err := bkt.Put(ctx, "x.b", []byte("not watched")); err != nil {
		t.Fatal(err)
	}
	r2, err := bkt.Put(ctx, "w.c", []byte("2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := bkt.Purge(ctx, "w.a"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []seen{{"w.c", "2", kv.OpPut}, {"w.a", "", kv.OpPurge}} {
		e := next(t, w)
		if e == nil {
			t.Fatal("a second end of replay")
		}
		if got := (seen{e.Key, string(e.Value), e.Op}); got != want {
			t.Fatalf("watched %v, want %v", got, want)
		}
		if e.Key == "w.c" && e.Revision != r2 {
			t.Fatalf("w.c at revision %d, want %d", e.Revision, r2)
		}
	}
	w.Stop()
	w.Stop() // twice is fine
	for {
		select {
		case _, ok := <-w.Updates():
			if !ok {
				return
			}
		case <-ctx.Done():
			t.Fatal("the channel did not close after Stop")
		}
	}
}

// TestKVNoLeader: a write nobody answers for (here the bucket's stream is
// gone; in a cluster, an election) is ErrNoLeader, which a caller may send
// again, and unavailable to the front ends.
func TestKVNoLeader(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := testCtx(t)
	bkt := f.openKV(t, "T_GONE")
	if err := f.js.DeleteKeyValue(ctx, "T_GONE"); err != nil {
		t.Fatal(err)
	}
	_, err := bkt.Put(ctx, "a", []byte("1"))
	if !errors.Is(err, kv.ErrNoLeader) {
		t.Fatalf("Put to a bucket nobody serves: %v, want ErrNoLeader", err)
	}
	if c := store.Classify("write", err); !errors.Is(c, store.ErrUnavailable) {
		t.Fatalf("Classify(%v) = %v, want unavailable", err, c)
	}
}
