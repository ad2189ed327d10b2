package gateway

import (
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// entry is a KV entry as the bucket's watcher hands it to the follower.
type entry struct {
	key string
	val []byte
	rev uint64
	op  jetstream.KeyValueOp
}

func (e entry) Bucket() string                  { return mapping.PropsBucket }
func (e entry) Key() string                     { return e.key }
func (e entry) Value() []byte                   { return e.val }
func (e entry) Revision() uint64                { return e.rev }
func (e entry) Created() time.Time              { return time.Time{} }
func (e entry) Delta() uint64                   { return 0 }
func (e entry) Operation() jetstream.KeyValueOp { return e.op }

// TestPropCacheFloor: the follower's late echo of an older write does not
// undo this gateway's own later write (CI once saw a cleared default list
// read back full: the put's echo arrived after the purge); entries from the
// own write on, other gateways' included, apply as before.
func TestPropCacheFloor(t *testing.T) {
	c := &propCache{log: slog.Default(), own: map[string]mapping.Props{}, resolved: map[string]mapping.Effective{}, floor: map[string]uint64{}}
	list := []byte(`[[".*",{"retry":0}]]`)
	l, err := mapping.ParseDefaultList(list)
	if err != nil {
		t.Fatal(err)
	}
	c.setDefaultsLocal(l, 5)   // own put, revision 5
	c.setDefaultsLocal(nil, 6) // own purge, revision 6
	c.apply(entry{key: defaultsKey, val: list, rev: 5, op: jetstream.KeyValuePut})
	if c.defaultList() != nil {
		t.Fatal("the put's late echo brought the cleared list back")
	}
	c.apply(entry{key: defaultsKey, rev: 6, op: jetstream.KeyValuePurge})
	c.apply(entry{key: defaultsKey, val: list, rev: 7, op: jetstream.KeyValuePut}) // another gateway's
	if len(c.defaultList()) != 1 {
		t.Fatal("a later write by another gateway was not applied")
	}

	enc := mapping.EncodeName("q")
	r1, r3 := 1, 3
	c.setLocal(enc, mapping.Props{Retry: &r3}, true, 9)
	c.apply(entry{key: ownKeyPrefix + enc, val: mapping.Props{Retry: &r1}.JSON(), rev: 8, op: jetstream.KeyValuePut})
	if got := c.effective("q").Retry; got != 3 {
		t.Fatalf("retry %d after an older echo, want 3", got)
	}
	c.apply(entry{key: ownKeyPrefix + enc, val: mapping.Props{Retry: &r3}.JSON(), rev: 9, op: jetstream.KeyValuePut})
	c.apply(entry{key: ownKeyPrefix + enc, rev: 10, op: jetstream.KeyValueDelete})
	if got := c.effective("q").Retry; got != 0 {
		t.Fatalf("retry %d after a later delete, want the default list's 0", got)
	}
	if len(c.floor) != 0 {
		t.Fatalf("floors left after their echoes: %v", c.floor)
	}
}
