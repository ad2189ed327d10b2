package gateway_test

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/store/bus"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// coreGoroutines returns the stacks of the goroutines that run code of
// package gateway (a frame of it anywhere on the stack), by goroutine id,
// leaving out the ids in skip.
func coreGoroutines(skip map[string]bool) map[string]string {
	out := make(map[string]string)
	for id, s := range allGoroutines() {
		if !skip[id] && strings.Contains(s, "/lmq-gateway/gateway.") {
			out[id] = s
		}
	}
	return out
}

// TestCloseLeavesNoGoroutines runs two cores through every kind of
// background work (pushes, delayed pushes, pulls, nacks, acks and nacks
// relayed from the other core, timeouts, pulls left waiting, deliveries and
// wake-ups still pending) and checks that once Close returned no goroutine
// runs code of the core any more: Close owns and waits for all of them, so
// the caller may close NATS right after it.
//
// Not parallel: it counts goroutines of the whole process (those running
// before it starts are left out by id).
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := coreGoroutines(nil)
	skip := make(map[string]bool, len(before))
	for id := range before {
		skip[id] = true
	}

	ns := testnats.Start(t)
	newOn := func(name string) *gateway.Gateway {
		nc := testnats.Connect(t, ns, name)
		g, err := gateway.New(ctxT(t), bus.New(nc), gateway.Config{RepollInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Close)
		return g
	}
	a, b := newOn("a"), newOn("b")
	ctx := ctxT(t)

	// Pull, nack, ack; a nack and an ack relayed through b.
	for i := 0; i < 4; i++ {
		mustPush(t, a, "life", "m")
	}
	d := mustPull(t, a, "life", 5*time.Second)
	if err := a.Messages().Reply(ctx, "life", d.ID, gateway.Nack); err != nil {
		t.Fatal(err)
	}
	d = mustPull(t, a, "life", 5*time.Second)
	if err := b.Messages().Reply(ctx, "life", d.ID, gateway.Nack); err != nil {
		t.Fatalf("relayed nack: %v", err)
	}
	d = mustPull(t, a, "life", 5*time.Second)
	if err := b.Messages().Reply(ctx, "life", d.ID, gateway.Ack); err != nil {
		t.Fatalf("relayed ack: %v", err)
	}
	d = mustPull(t, a, "life", 5*time.Second)
	if err := a.Messages().Reply(ctx, "life", d.ID, gateway.Ack); err != nil {
		t.Fatal(err)
	}

	// A delayed push reaches a waiting client (the wake-up fires).
	if _, err := a.Messages().PushWith(ctx, "later", gateway.Message{Body: []byte("d")}, gateway.PushOptions{Delay: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	d = mustPull(t, a, "later", 10*time.Second)
	if err := a.Messages().Reply(ctx, "later", d.ID, gateway.Ack); err != nil {
		t.Fatal(err)
	}

	// A delivery times out and comes back (its timer releases it).
	timeoutProps(t, a, "short", 0.2)
	mustPush(t, a, "short", "t")
	first := mustPull(t, a, "short", 5*time.Second)
	again := mustPull(t, a, "short", 10*time.Second)
	if again.ID == first.ID || string(again.Message.Body) != "t" {
		t.Fatalf("after the timeout got %+v", again)
	}

	// A delivery the front end could not hand over.
	mustPush(t, a, "left", "x")
	a.Messages().Abandon(ctx, mustPull(t, a, "left", 5*time.Second))
	if d := mustPull(t, a, "left", 5*time.Second); string(d.Message.Body) != "x" {
		t.Fatalf("abandoned message came back as %q", d.Message.Body)
	}

	// Left pending at Close: a delivery with its timer, a wake-up an hour
	// ahead, a client waiting, messages for nobody.
	mustPush(t, a, "pending", "p")
	_ = mustPull(t, a, "pending", 5*time.Second)
	if _, err := a.Messages().PushWith(ctx, "pending", gateway.Message{Body: []byte("h")}, gateway.PushOptions{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	sig := gateway.Signals(a).Dispatch
	sig.WaiterParked.Init(t)
	go func() {
		_, err := a.Messages().Pull(context.Background(), "idle", -1)
		waited <- err
	}()
	for i := 0; i < 20; i++ {
		mustPush(t, b, "burst", "b")
	}
	waitParked(sig, "idle")

	// Relayed nacks under way while a closes: each is a release to JetStream
	// on a goroutine of a, which Close must wait for.
	const relayed = 30
	for i := 0; i < relayed; i++ {
		mustPush(t, a, "relayq", "r")
	}
	ids := make([]string, relayed)
	for i := range ids {
		ids[i] = mustPull(t, a, "relayq", 5*time.Second).ID
	}
	held := a.Inspect().InFlight()
	var replies sync.WaitGroup
	for _, id := range ids {
		replies.Add(1)
		go func() {
			defer replies.Done()
			// May fail: a is closing. A relay lost with a's subscription
			// would hold this client for the relay timeout; it gives up
			// sooner.
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_ = b.Messages().Reply(rctx, "relayq", id, gateway.Nack)
		}()
	}
	testwait.For(t, "a relayed nack under way", func() bool { return a.Inspect().InFlight() != held })

	a.Close()
	replies.Wait()
	b.Close()
	if err := <-waited; err != nil {
		t.Fatalf("waiting pull at Close: %v", err)
	}
	// Close has returned. A goroutine of the core may still be between its
	// last deferred call and its end (running, in code of the core), but
	// none may be blocked, sleeping or inside NATS: that one would still be
	// working, or about to, with NATS closed under it.
	for _, s := range coreGoroutines(skip) {
		head, _, _ := strings.Cut(s, "\n")
		exiting := strings.Contains(head, "[running]") || strings.Contains(head, "[runnable]")
		if !exiting || strings.Contains(s, "github.com/nats-io/") {
			t.Errorf("goroutine of the core still working after Close:\n%s", s)
		}
	}
	var left map[string]string
	if testwait.Until(testwait.Bound, func() bool { left = coreGoroutines(skip); return len(left) == 0 }) {
		return
	}
	for _, s := range left {
		t.Errorf("goroutine of the core still running after Close:\n%s", s)
	}
}

// ownGoroutines returns the stacks of the goroutines that run (or were
// started by) code of this module but its tests and test helpers: the core
// and every package under it (followers, peers, the store's watchers), by
// goroutine id, leaving out the ids in skip.
func ownGoroutines(skip map[string]bool) map[string]string {
	out := make(map[string]string)
	for id, s := range allGoroutines() {
		if skip[id] {
			continue
		}
		for _, line := range strings.Split(s, "\n") {
			if strings.Contains(line, "lmq-gateway/lmq-gateway/") && !strings.Contains(line, "_test.") &&
				!strings.Contains(line, "lmq-gateway/internal/lmqtest/") {
				out[id] = s
				break
			}
		}
	}
	return out
}

// allGoroutines returns the stacks of every goroutine, by id.
func allGoroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := make(map[string]string)
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		head, _, _ := strings.Cut(string(g), " [")
		out[strings.TrimPrefix(head, "goroutine ")] = string(g)
	}
	return out
}

// TestNewUndoesAFailedStart: when one of the core's services fails to start
// (here the queue registry: a stream holds its bucket's name but is no KV
// bucket), New stops those started before it (the properties' follower
// and its watch, the work owner) and starts none after it (the dispatcher,
// the peers): once New returned its error, nothing of the module runs.
//
// Not parallel: it looks at the goroutines of the whole process (those
// running before New are left out by id).
func TestNewUndoesAFailedStart(t *testing.T) {
	ns := testnats.Start(t)
	nc := testnats.Connect(t, ns, "undo")
	bogus := "KV_" + mapping.QueuesBucket
	if _, err := testnats.JetStream(t, nc).CreateStream(ctxT(t), jetstream.StreamConfig{
		Name: bogus, Subjects: []string{"$KV." + mapping.QueuesBucket + ".>"},
	}); err != nil {
		t.Fatal(err)
	}
	skip := make(map[string]bool)
	for id := range allGoroutines() {
		skip[id] = true
	}
	g, err := gateway.New(ctxT(t), bus.New(nc), gateway.Config{})
	if err == nil {
		g.Close()
		t.Fatal("New started on a registry bucket that is no KV bucket")
	}
	if !strings.Contains(err.Error(), "queue registry") {
		t.Fatalf("New failed with %v, want the queue registry's failure", err)
	}
	// Stop returned when every goroutine ended; one may still be between
	// its last deferred call and its end, hence the wait.
	var left map[string]string
	if testwait.Until(testwait.Bound, func() bool { left = ownGoroutines(skip); return len(left) == 0 }) {
		return
	}
	for _, s := range left {
		t.Errorf("goroutine still running after a failed New:\n%s", s)
	}
}
