package accumulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/internal/testsignal"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func startServer(t *testing.T, dir string) *embedded.Server {
	t.Helper()
	return testnats.StartWith(t, embedded.Options{DataDir: dir})
}

// gw is one gateway: a core with an accumulator.
type gw struct {
	core *gateway.Gateway
	acc  *Accumulator
	nc   *nats.Conn
}

func (g *gw) close() {
	g.acc.Stop()
	g.core.Close()
	g.nc.Close()
}

// settled returns once the bucket holds exactly the keys keep (sorted) and
// the scheduler runs no close (quiet): the windows the test closed are done
// with, and a compound that must not be there would be by now.
func settled(t *testing.T, g *gw, keep ...string) {
	t.Helper()
	testwait.ForDetail(t, "the bucket to hold only the keys kept", func() (bool, string) {
		keys, err := g.acc.kv.Keys(ctxT(t, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return slices.Equal(keys, keep), fmt.Sprintf("keys %q", keys)
	})
	quiet(t, g)
}

// quiet returns once the scheduler runs no close: with the windows' keys
// gone from the bucket, nothing can store another compound after that
// point, so a test may look for one that must not be there. It asks the
// scheduler's goroutine itself: it hands it the result of a close that
// never ran (a window that no key names, which the loop only forgets) and
// takes the WindowClosed signal reporting it, with the closes still
// running; while some run, it waits for one to finish and asks again.
func quiet(t *testing.T, g *gw) {
	t.Helper()
	sig := &g.acc.TestSignals.WindowClosed
	sig.Init(t)
	for i := 0; ; i++ {
		probe := "quiet-probe-" + strconv.Itoa(i)
		select {
		case g.acc.sched.results <- result{window: probe}:
		case <-time.After(testsignal.Bound): // a guard against a hang
			t.Fatal("the scheduler does not take results")
		}
		if c := sig.WaitFor("the probe's result", func(c Closed) bool { return c.Window == probe }); c.Running == 0 {
			return
		}
		sig.WaitOrTimeout() // a close finished
	}
}

// restart stops the gateway and its NATS server, and starts both again
// on dir. With overdue, the open windows fall due while it is down: their
// pointers, rewritten with a connection of the test's own once the gateway
// has stopped, say that their deadline passed an hour ago.
func restart(t *testing.T, dir string, ns *embedded.Server, g *gw, overdue bool) (*embedded.Server, *gw) {
	t.Helper()
	g.close()
	if overdue {
		makeOverdue(t, ns)
	}
	ns.Stop()
	ns = startServer(t, dir)
	return ns, startGW(t, ns)
}

// accumKV opens the accumulator's bucket on a connection of the test's
// own (closed when the test ends), as another writer of the bucket.
func accumKV(t *testing.T, ctx context.Context, ns *embedded.Server) jetstream.KeyValue {
	t.Helper()
	nc, err := ns.Connect("test-writer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, mapping.AccumBucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// makeOverdueKey rewrites the window pointer key with a deadline an hour
// ago and returns the window.
func makeOverdueKey(t *testing.T, ctx context.Context, kv jetstream.KeyValue, key string) window {
	t.Helper()
	e, err := kv.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var w window
	if err := json.Unmarshal(e.Value(), &w); err != nil {
		t.Fatal(err)
	}
	w.Deadline = time.Now().Add(-time.Hour).UnixNano()
	b, _ := json.Marshal(w)
	if _, err := kv.Update(ctx, key, b, e.Revision()); err != nil {
		t.Fatal(err)
	}
	return w
}

// makeOverdue rewrites every window pointer of the bucket with a deadline
// an hour ago.
func makeOverdue(t *testing.T, ns *embedded.Server) {
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	kv := accumKV(t, ctx, ns)
	keys, err := kv.Keys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.HasPrefix(k, ptrPrefix) {
			makeOverdueKey(t, ctx, kv, k)
		}
	}
}

func startGW(t *testing.T, ns *embedded.Server) *gw {
	t.Helper()
	nc, err := ns.Connect("test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 10*time.Second)
	core, err := gateway.New(ctx, bus.New(nc), gateway.Config{})
	if err != nil {
		t.Fatal(err)
	}
	acc := New(bus.New(nc), core, Config{})
	if err := acc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	core.SetAccumulator(acc)
	g := &gw{core: core, acc: acc, nc: nc}
	t.Cleanup(g.close)
	return g
}

// startAccumQueue starts a NATS server on dir and one gateway on it, and
// makes queue accumulate for accum seconds with retry retries: the start of
// most tests here.
func startAccumQueue(t *testing.T, dir, queue string, accum float64, retry int) (*embedded.Server, *gw) {
	t.Helper()
	ns := startServer(t, dir)
	g := startGW(t, ns)
	setAccum(t, g, queue, accum, retry)
	return ns, g
}

func setAccum(t *testing.T, g *gw, queue string, accum float64, retry int) {
	t.Helper()
	if err := g.core.Queues().UpdateProps(ctxT(t, 5*time.Second), queue, mapping.Props{Accum: &accum, Retry: &retry}); err != nil {
		t.Fatal(err)
	}
}

// waitAccum waits until g sees the queue accumulate (props of another
// gateway arrive through a KV watch, signalled as applied).
func waitAccum(t *testing.T, g *gw, queue string) {
	t.Helper()
	applied := gateway.Signals(g.core).PropsApplied
	applied.Init(t)
	applied.WaitUntil(queue+" accumulates", func() bool {
		p, err := g.core.Queues().QueueProps(context.Background(), queue)
		return err == nil && p.Accum > 0
	})
}

func push(t *testing.T, g *gw, queue, body string) gateway.AccumState {
	t.Helper()
	st, err := g.core.Messages().Push(ctxT(t, 10*time.Second), queue, gateway.Message{ContentType: "text/plain", Body: []byte(body)})
	if err != nil {
		t.Fatalf("push %s: %v", body, err)
	}
	return st
}

// pull takes one delivery within wait and acks it; nil when none came.
func pull(t *testing.T, g *gw, queue string, wait time.Duration) *gateway.Delivery {
	t.Helper()
	ctx := ctxT(t, wait+10*time.Second)
	d, err := g.core.Messages().Pull(ctx, queue, wait)
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	if d != nil {
		if err := g.core.Messages().Reply(ctx, queue, d.ID, gateway.Ack); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	return d
}

func bodies(d *gateway.Delivery) []string {
	var out []string
	for _, p := range d.Parts {
		out = append(out, string(p.Body))
	}
	return out
}

// streamState reports the queue's parts left and the bucket's live keys.
func leftovers(t *testing.T, g *gw, queue string) (parts uint64, keys []string) {
	t.Helper()
	ctx := ctxT(t, 5*time.Second)
	js, err := jetstream.New(g.nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, mapping.StreamName(queue))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(mapping.PartSubject(queue)))
	if err != nil {
		t.Fatal(err)
	}
	keys, err = g.acc.kv.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[mapping.PartSubject(queue)], keys
}

// wantLeft fails the test unless the queue has wantParts parts left and the
// bucket exactly the keys wantKeys.
func wantLeft(t *testing.T, g *gw, queue string, wantParts uint64, wantKeys ...string) {
	t.Helper()
	if parts, keys := leftovers(t, g, queue); parts != wantParts || !slices.Equal(keys, wantKeys) {
		t.Fatalf("left behind: %d parts, keys %q; want %d, %q", parts, keys, wantParts, wantKeys)
	}
}

func TestWindowBecomesOneCompound(t *testing.T) {
	t.Parallel()
	const q = "acc/basic"
	_, g := startAccumQueue(t, t.TempDir(), q, 0.4, 4)
	ctx := ctxT(t, 20*time.Second)
	st, err := g.core.Messages().Push(ctx, q, gateway.Message{ContentType: "text/plain", Body: []byte("one"),
		Kept: []gateway.Header{{Name: "x-a", Value: "1"}}})
	if err != nil || st != gateway.AccumNew {
		t.Fatalf("first push: %v %v", st, err)
	}
	// retry is fixed when the window opens: this change does not apply to it.
	setAccum(t, g, q, 0.4, 1)
	if st := push(t, g, q, "two"); st != gateway.AccumYes {
		t.Fatalf("second push: %v", st)
	}
	if _, err := g.core.Messages().Push(ctx, q, gateway.Message{Body: []byte("three")}); err != nil {
		t.Fatal(err)
	}
	if d := pull(t, g, q, 0); d != nil {
		t.Fatalf("pulled from an open window: %+v", d)
	}
	d := pull(t, g, q, 3*time.Second)
	if d == nil || !d.Compound {
		t.Fatalf("no compound message: %+v", d)
	}
	if got := bodies(d); !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Fatalf("parts %q", got)
	}
	p0, p1, p2 := d.Parts[0], d.Parts[1], d.Parts[2]
	if p0.ContentType != "text/plain" || len(p0.Kept) != 1 || p0.Kept[0] != (gateway.Header{Name: "x-a", Value: "1"}) ||
		p1.ContentType != "text/plain" || len(p1.Kept) != 0 || p2.ContentType != "" {
		t.Fatalf("part metadata: %+v", d.Parts)
	}
	if d.RetryRemaining != 4 {
		t.Fatalf("retry remaining %d, want 4 (retry 4 fixed at opening)", d.RetryRemaining)
	}
	settled(t, g)
	if d := pull(t, g, q, 0); d != nil {
		t.Fatalf("second message: %+v", d)
	}
	// Everything of the window is gone: parts, pointer, job.
	wantLeft(t, g, q, 0)
	// The next push opens a new window.
	if st := push(t, g, q, "four"); st != gateway.AccumNew {
		t.Fatalf("push after close: %v", st)
	}
	if d := pull(t, g, q, 3*time.Second); d == nil || !slices.Equal(bodies(d), []string{"four"}) {
		t.Fatalf("second window: %+v", d)
	}
}

// collect pulls and acks compounds until none came for quiet.
func collect(t *testing.T, g *gw, queue string, quiet time.Duration) [][]string {
	t.Helper()
	var out [][]string
	for {
		d := pull(t, g, queue, quiet)
		if d == nil {
			return out
		}
		if !d.Compound {
			t.Fatalf("normal message in an accumulating queue: %q", d.Message.Body)
		}
		out = append(out, bodies(d))
	}
}

// checkExactlyOnce checks that every pushed body is in exactly one compound,
// that each pusher's parts keep their order, and that there is one "new" per
// compound.
func checkExactlyOnce(t *testing.T, compounds [][]string, pushed map[string]bool, news int) {
	t.Helper()
	seen := make(map[string]int)
	last := make(map[string]int) // pusher → last index seen
	for _, c := range compounds {
		for _, b := range c {
			seen[b]++
			var who string
			var i int
			if _, err := fmt.Sscanf(b, "%s %d", &who, &i); err != nil {
				t.Fatalf("body %q", b)
			}
			if prev, ok := last[who]; ok && i <= prev {
				t.Errorf("%s: part %d after %d", who, i, prev)
			}
			last[who] = i
		}
	}
	for b := range pushed {
		if seen[b] != 1 {
			t.Errorf("part %q delivered %d times", b, seen[b])
		}
	}
	for b, n := range seen {
		if !pushed[b] {
			t.Errorf("part %q delivered %d times but never pushed", b, n)
		}
	}
	if news != len(compounds) {
		t.Errorf("%d pushes answered new, %d compound messages", news, len(compounds))
	}
}

// pushLoad runs pushers concurrently, each pushing n parts through the
// gateways in turn with a pause between pushes.
func pushLoad(t *testing.T, gws []*gw, queue string, pushers, n int, pause time.Duration) (map[string]bool, int) {
	t.Helper()
	var mu sync.Mutex
	pushed := make(map[string]bool)
	news := 0
	var wg sync.WaitGroup
	errs := make(chan error, pushers)
	for p := range pushers {
		wg.Go(func() {
			for i := range n {
				g := gws[(p+i)%len(gws)]
				body := fmt.Sprintf("p%d %d", p, i)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				st, err := g.core.Messages().Push(ctx, queue, gateway.Message{Body: []byte(body)})
				cancel()
				if err != nil {
					errs <- fmt.Errorf("push %q: %w", body, err)
					return
				}
				mu.Lock()
				pushed[body] = true
				if st == gateway.AccumNew {
					news++
				}
				mu.Unlock()
				time.Sleep(pause) // pacing the load: the time between pushes is the test's input
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return pushed, news
}

// Windows of 50 ms under a steady stream of pushes: many windows close while
// pushes are in flight, which exercises the cut.
func TestShortWindows(t *testing.T) {
	t.Parallel()
	const q = "acc/short"
	_, g := startAccumQueue(t, t.TempDir(), q, 0.05, 2)
	pushed, news := pushLoad(t, []*gw{g}, q, 4, 60, 5*time.Millisecond)
	compounds := collect(t, g, q, time.Second)
	if len(compounds) < 3 {
		t.Errorf("only %d windows in about a second of 50 ms windows", len(compounds))
	}
	checkExactlyOnce(t, compounds, pushed, news)
	wantLeft(t, g, q, 0)
}

// Two gateways on one NATS push into the same queue: one compound per window,
// no part twice.
func TestTwoGateways(t *testing.T) {
	t.Parallel()
	ns := startServer(t, t.TempDir())
	g1, g2 := startGW(t, ns), startGW(t, ns)
	const q = "acc/two"
	setAccum(t, g1, q, 0.1, 2)
	waitAccum(t, g2, q)
	pushed, news := pushLoad(t, []*gw{g1, g2}, q, 4, 40, 5*time.Millisecond)
	// Pull through both gateways.
	var compounds [][]string
	for {
		c1 := collect(t, g1, q, 500*time.Millisecond)
		c2 := collect(t, g2, q, 100*time.Millisecond)
		compounds = append(append(compounds, c1...), c2...)
		if len(c1)+len(c2) == 0 {
			break
		}
	}
	checkExactlyOnce(t, compounds, pushed, news)
}

// The gateway stops with a window open and comes back: before the deadline,
// and after it (the window closed while it was down).
func TestRestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		accum float64
		due   bool
	}{
		{"open", 1.5, false},
		{"closed while down", 1.5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			const q = "acc/restart"
			ns, g := startAccumQueue(t, dir, q, tc.accum, 2)
			want := []string{"a", "b", "c"}
			for _, b := range want {
				push(t, g, q, b)
			}
			_, g = restart(t, dir, ns, g, tc.due)
			if !tc.due {
				if d := pull(t, g, q, 0); d != nil {
					t.Fatalf("window delivered before its deadline: %+v", d)
				}
			}
			d := pull(t, g, q, 5*time.Second)
			if d == nil || !slices.Equal(bodies(d), want) {
				t.Fatalf("after restart: %+v", d)
			}
			settled(t, g)
			if d := pull(t, g, q, 0); d != nil {
				t.Fatalf("delivered twice: %+v", d)
			}
		})
	}
}

// A window of an hour is only a heap entry: nothing is pulled, and the
// window is still there after a restart.
func TestHourWindow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const q = "acc/hour"
	ns, g := startAccumQueue(t, dir, q, 3600, 2)
	if st := push(t, g, q, "a"); st != gateway.AccumNew {
		t.Fatal(st)
	}
	if st := push(t, g, q, "b"); st != gateway.AccumYes {
		t.Fatal(st)
	}
	if d := pull(t, g, q, 200*time.Millisecond); d != nil {
		t.Fatalf("pulled from an open window: %+v", d)
	}
	_, g = restart(t, dir, ns, g, false)
	if st := push(t, g, q, "c"); st != gateway.AccumYes {
		t.Fatalf("push after restart: %v", st)
	}
	c := g.acc.cachedPtr(mapping.EncodeName(q))
	if c.w == nil || time.Until(c.w.deadline()) < 59*time.Minute {
		t.Fatalf("window after restart: %+v", c.w)
	}
	if d := pull(t, g, q, 0); d != nil {
		t.Fatalf("pulled from an open window: %+v", d)
	}
}

// accumGoroutines counts the goroutines running code of this package.
func accumGoroutines() int {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "lmq-gateway/accumulator.") {
			n++
		}
	}
	return n
}

// Open windows cost no goroutine and no timer: opening windows on many
// queues adds entries to the scheduler's heap, nothing else. (Not parallel,
// so that no other test's gateway runs meanwhile.)
func TestManyQueuesNoGoroutineEach(t *testing.T) {
	ns := startServer(t, t.TempDir())
	g := startGW(t, ns)
	const n = 200
	accum, retry := 30.0, 0
	ctx := ctxT(t, 60*time.Second)
	for i := range n {
		q := "acc/many/" + strconv.Itoa(i)
		if err := g.core.Queues().UpdateProps(ctx, q, mapping.Props{Accum: &accum, Retry: &retry}); err != nil {
			t.Fatal(err)
		}
	}
	before := accumGoroutines()
	g.acc.TestSignals.ChangeApplied.Init(t)
	windows := make(map[string]bool)
	for i := range n {
		q := "acc/many/" + strconv.Itoa(i)
		windows[ptrKey(mapping.EncodeName(q))] = true
		if st := push(t, g, q, "x"); st != gateway.AccumNew {
			t.Fatal(st)
		}
	}
	// Once the scheduler has taken in every window (from its watch), a
	// goroutine or timer it made per window would be there.
	g.acc.TestSignals.ChangeApplied.WaitN(n, "the scheduler to apply every window", func(key string) bool {
		ok := windows[key]
		delete(windows, key)
		return ok
	})
	if after := accumGoroutines(); after != before {
		t.Fatalf("accumulator goroutines %d → %d with %d open windows", before, after, n)
	}
	g.acc.mu.RLock()
	cachedN := len(g.acc.cache)
	g.acc.mu.RUnlock()
	if cachedN != n {
		t.Fatalf("%d windows known, want %d", cachedN, n)
	}
}

// Many windows fall due at once (they closed while the gateway was down):
// a few workers close them all, each once.
func TestManyWindowsDueAtRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ns := startServer(t, dir)
	g := startGW(t, ns)
	const n = 3 * workers
	for i := range n {
		q := "acc/due/" + strconv.Itoa(i)
		setAccum(t, g, q, 60, 2)
		push(t, g, q, "a")
		push(t, g, q, "b")
	}
	// The windows (a minute) fall due while down.
	_, g = restart(t, dir, ns, g, true)
	for i := range n {
		q := "acc/due/" + strconv.Itoa(i)
		if d := pull(t, g, q, 5*time.Second); d == nil || !slices.Equal(bodies(d), []string{"a", "b"}) {
			t.Fatalf("%s: %+v", q, d)
		}
	}
	settled(t, g) // a second compound would be stored by now
	for i := range n {
		q := "acc/due/" + strconv.Itoa(i)
		if d := pull(t, g, q, 0); d != nil {
			t.Fatalf("%s delivered twice: %q", q, bodies(d))
		}
		if parts, _ := leftovers(t, g, q); parts != 0 {
			t.Fatalf("%s: %d parts left", q, parts)
		}
	}
}
