package gateway

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// prioCore starts an embedded NATS server and a gateway on it, and returns a
// JetStream handle of a second connection for looking at the streams.
// msgWait bounds a pull that must find a message: only reached when the
// test fails, so generous for a loaded machine.
const msgWait = 20 * time.Second

func prioCore(t *testing.T) (*Gateway, jetstream.JetStream) {
	t.Helper()
	ns := testnats.Start(t)
	return gatewayOn(t, ns, "core"), testnats.JetStream(t, testnats.Connect(t, ns, "look"))
}

// gatewayOn starts a gateway on its own connection to ns, closed with the
// test.
func gatewayOn(t *testing.T, ns *embedded.Server, name string) *Gateway {
	t.Helper()
	g, err := New(context.Background(), bus.New(testnats.Connect(t, ns, name)), Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

func prioCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func pushP(t *testing.T, g *Gateway, queue, body string, p int) {
	t.Helper()
	opts := PushOptions{}
	if p >= 0 {
		opts.Priority = &p
	}
	if _, err := g.Messages().PushWith(prioCtx(t), queue, Message{Body: []byte(body)}, opts); err != nil {
		t.Fatalf("push %s p%d: %v", body, p, err)
	}
}

func pullP(t *testing.T, g *Gateway, queue string) *Delivery {
	t.Helper()
	d, err := g.Messages().Pull(prioCtx(t), queue, msgWait)
	if err != nil || d == nil {
		t.Fatalf("pull %s: %v %v", queue, d, err)
	}
	return d
}

// pullOrder pulls n messages, acking each, and returns their bodies.
// wantOrder pulls (and acks) as many messages as want names, separated by
// spaces, checks that they came in that order, and that the queue is then
// empty.
func wantOrder(t *testing.T, g *Gateway, queue, want string) {
	t.Helper()
	if got := strings.Join(pullOrder(t, g, queue, len(strings.Fields(want))), " "); got != want {
		t.Fatalf("order %s, want %s", got, want)
	}
}

func pullOrder(t *testing.T, g *Gateway, queue string, n int) []string {
	t.Helper()
	var got []string
	for range n {
		d := pullP(t, g, queue)
		if want := d.Message.Body; len(want) > 0 && want[0] == 'p' && int(want[1]-'0') != d.Priority {
			t.Errorf("%s delivered with priority %d", want, d.Priority)
		}
		got = append(got, string(d.Message.Body))
		if err := g.Messages().Reply(prioCtx(t), queue, d.ID, Ack); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := g.Messages().Pull(prioCtx(t), queue, 0); d != nil || err != nil {
		t.Fatalf("queue not empty: %+v %v", d, err)
	}
	return got
}

// TestPriorityOrder: higher priorities first, push order within one, the
// queue's property as the default of pushes without one, 0 as the default
// of everything.
func TestPriorityOrder(t *testing.T) {
	t.Parallel()
	g, _ := prioCore(t)
	// Body "p<p>-<n>"; -1 means no option (the queue's default).
	pushes := []struct {
		body string
		p    int
	}{
		{"p0-1", -1}, {"p3-1", 3}, {"p9-1", 9}, {"p0-2", 0}, {"p3-2", 3}, {"p1-1", 1}, {"p9-2", 9}, {"p0-3", -1},
	}
	for _, x := range pushes {
		pushP(t, g, "prio", x.body, x.p)
	}
	got := strings.Join(pullOrder(t, g, "prio", len(pushes)), " ")
	if want := "p9-1 p9-2 p3-1 p3-2 p1-1 p0-1 p0-2 p0-3"; got != want {
		t.Fatalf("order %s, want %s", got, want)
	}

	// The property sets the default priority; an explicit 0 overrides it.
	five := 5
	if err := g.Queues().UpdateProps(prioCtx(t), "prio", mapping.Props{Priority: &five}); err != nil {
		t.Fatal(err)
	}
	pushP(t, g, "prio", "p0-4", 0)
	pushP(t, g, "prio", "p5-1", -1)
	pushP(t, g, "prio", "p6-1", 6)
	got = strings.Join(pullOrder(t, g, "prio", 3), " ")
	if want := "p6-1 p5-1 p0-4"; got != want {
		t.Fatalf("order %s, want %s", got, want)
	}

	// Out of range: ErrInvalid.
	for _, p := range []int{-1, 10} {
		if _, err := g.Messages().PushWith(prioCtx(t), "prio", Message{Body: []byte("x")}, PushOptions{Priority: &p}); err == nil {
			t.Errorf("priority %d accepted", p)
		}
	}
}

// TestPriorityNackAndTimeout: a nacked or timed-out message goes to the tail
// of its own priority, ahead of lower ones and behind its equals.
func TestPriorityNackAndTimeout(t *testing.T) {
	t.Parallel()
	g, _ := prioCore(t)
	timeout := 1.0
	if err := g.Queues().UpdateProps(prioCtx(t), "pn", mapping.Props{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		body string
		p    int
	}{{"p0-1", 0}, {"p4-1", 4}, {"p4-2", 4}, {"p4-3", 4}, {"p2-1", 2}} {
		pushP(t, g, "pn", x.body, x.p)
	}
	d := pullP(t, g, "pn") // p4-1: nacked, to the tail of priority 4
	if string(d.Message.Body) != "p4-1" || d.Priority != 4 {
		t.Fatalf("first %s p%d", d.Message.Body, d.Priority)
	}
	if err := g.Messages().Reply(prioCtx(t), "pn", d.ID, Nack); err != nil {
		t.Fatal(err)
	}
	timedOut := Signals(g).TimedOut
	timedOut.Init(t)
	d = pullP(t, g, "pn") // p4-2: left to time out
	if string(d.Message.Body) != "p4-2" {
		t.Fatalf("second %s", d.Message.Body)
	}
	// The status counts a priority's delivery in flight.
	testwait.For(t, "the status counts the delivery in flight", func() bool {
		s, err := g.Inspect().QueueStatus(prioCtx(t), "pn")
		if err != nil {
			t.Fatal(err)
		}
		return s.InFlight == 1 || g.inFlightCount("pn") == 0
	})
	if g.inFlightCount("pn") == 0 {
		t.Fatal("QueueStatus never counted the priority delivery in flight")
	}
	// Wait for the timeout: the message is available again (at the tail of
	// priority 4, behind p4-3 and the nacked p4-1).
	timedOut.WaitFor("p4-2's delivery timed out", func(x TimedOutDelivery) bool { return x.ID == d.ID })
	if qi, err := g.Inspect().Queue(prioCtx(t), "pn"); err != nil || qi.Size != 5 || g.inFlightCount("pn") != 0 {
		t.Fatalf("after the timeout: %+v, %d in flight, %v; want 5 waiting, none in flight", qi, g.inFlightCount("pn"), err)
	}
	wantOrder(t, g, "pn", "p4-3 p4-1 p4-2 p2-1 p0-1")
}

// inFlightCount is the number of deliveries of queue this gateway has out.
func (g *Gateway) inFlightCount(queue string) int {
	return g.dels.ByQueue()[queue]
}

// TestPriorityDeadLetterRespawn: a dead letter keeps its priority, and a
// respawn brings it back to its level.
func TestPriorityDeadLetterRespawn(t *testing.T) {
	t.Parallel()
	g, _ := prioCore(t)
	retry, yes := 0, true
	if err := g.Queues().UpdateProps(prioCtx(t), "pd", mapping.Props{Retry: &retry, DeadLetter: &yes}); err != nil {
		t.Fatal(err)
	}
	pushP(t, g, "pd", "p7-1", 7)
	d := pullP(t, g, "pd")
	if err := g.Messages().Reply(prioCtx(t), "pd", d.ID, Nack); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "one dead letter", func() bool {
		det, err := g.Inspect().QueueDetail(prioCtx(t), "pd")
		if err != nil {
			t.Fatal(err)
		}
		return det.DeadLetters == 1
	})
	pushP(t, g, "pd", "p0-1", 0)
	pushP(t, g, "pd", "p6-1", 6)
	if n, err := g.Inspect().RespawnDeadLetters(prioCtx(t), "pd", 1); n != 1 || err != nil {
		t.Fatalf("respawn %d %v", n, err)
	}
	wantOrder(t, g, "pd", "p7-1 p6-1 p0-1")
}

// TestPriorityUnusedOneRequestPerPull: a queue that never saw a priority
// sends exactly one pull request per pull and has no priority consumer;
// once priorities are used, their consumers exist, and DeleteQueue removes
// them with the queue.
func TestPriorityUnusedOneRequestPerPull(t *testing.T) {
	t.Parallel()
	g, js := prioCore(t)
	const n = 20
	for i := range n {
		pushP(t, g, "plain", "m"+string(rune('a'+i)), -1)
	}
	pullP(t, g, "plain") // makes the consumer (and looks at the levels once)
	before := g.disp.PullRequests()
	for range n - 1 {
		d := pullP(t, g, "plain")
		if d.Priority != 0 {
			t.Fatalf("priority %d", d.Priority)
		}
	}
	if reqs := g.disp.PullRequests() - before; reqs != n-1 {
		t.Fatalf("%d pull requests for %d pulls", reqs, n-1)
	}
	consumers := func() []string {
		var out []string
		st, err := js.Stream(prioCtx(t), mapping.StreamName("plain"))
		if err != nil {
			t.Fatal(err)
		}
		names := st.ConsumerNames(prioCtx(t))
		for c := range names.Name() {
			out = append(out, c)
		}
		return out
	}
	if cs := consumers(); len(cs) != 1 || cs[0] != mapping.ConsumerName("plain") {
		t.Fatalf("consumers %v", cs)
	}
	seen, ok := g.disp.PrioritySeen("plain")
	if !ok {
		t.Fatal("no dispatcher")
	}
	if seen {
		t.Fatal("priorities marked as seen")
	}

	// Using a priority makes its consumer; deleting the queue removes it.
	pushP(t, g, "plain", "p2-1", 2)
	if d := pullP(t, g, "plain"); string(d.Message.Body) != "p2-1" {
		t.Fatalf("got %s", d.Message.Body)
	}
	if cs := consumers(); len(cs) != 2 {
		t.Fatalf("consumers %v", cs)
	}
	if err := g.Queues().DeleteQueue(prioCtx(t), "plain"); err != nil {
		t.Fatal(err)
	}
	if cs := consumers(); len(cs) != 0 {
		t.Fatalf("consumers after delete %v", cs)
	}
}

// TestPriorityLearnedByOtherGateway: a second gateway on the same NATS
// learns the priorities of messages pushed through the first, both from the
// notification (waiting) and from the stream (a fresh start).
func TestPriorityLearnedByOtherGateway(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	g1 := gatewayOn(t, ns, "g1")
	for _, x := range []struct {
		body string
		p    int
	}{{"p0-1", 0}, {"p2-1", 2}, {"p8-1", 8}, {"p2-2", 2}} {
		pushP(t, g1, "po", x.body, x.p)
	}
	// A fresh gateway: it learns the levels when it makes the consumer.
	g2 := gatewayOn(t, ns, "g2")
	wantOrder(t, g2, "po", "p8-1 p2-1 p2-2 p0-1")
	// A waiting pull on g2 is woken by g1's notification of a priority.
	done := make(chan *Delivery, 1)
	g2.disp.TestSignals.WaiterParked.Init(t)
	go func() {
		d, _ := g2.Messages().Pull(prioCtx(t), "po", 20*time.Second)
		done <- d
	}()
	waitParkedOn(g2, "po")
	pushP(t, g1, "po", "p3-1", 3)
	d := <-done
	if d == nil || string(d.Message.Body) != "p3-1" || d.Priority != 3 {
		t.Fatalf("woken with %+v", d)
	}
}

// TestPriorityNotifiedBeforeFirstUse: a gateway's first pull of a queue
// sees a priority pushed through another gateway just before, which the
// shard's look it shares with other queues (taken earlier) does not show:
// the notification, come before the queue had any state here, was kept.
func TestPriorityNotifiedBeforeFirstUse(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	g1, g2 := gatewayOn(t, ns, "g1"), gatewayOn(t, ns, "g2")
	for _, g := range []*Gateway{g1, g2} {
		g.peers.TestHeard.Init(t)
		g.peers.TestHeard.WaitUntil("the gateways to know each other", g.peers.Any)
	}
	// Two queues of one shard: g2's first use of the first one looks at
	// the shard.
	first, second := "nf-0", ""
	for i := 1; second == ""; i++ {
		if n := fmt.Sprintf("nf-%d", i); mapping.Shard(n) == mapping.Shard(first) {
			second = n
		}
	}
	pushP(t, g1, first, "x", 0)
	if d := pullP(t, g2, first); string(d.Message.Body) != "x" {
		t.Fatalf("pulled %q", d.Message.Body)
	}
	notified := &g2.disp.TestSignals.Notified
	notified.Init(t)
	pushP(t, g1, second, "p0", 0)
	pushP(t, g1, second, "p5", 5)
	notified.WaitUntil("g1's notification of priority 5 at g2", func() bool {
		return g2.disp.NotifiedBeforeUse(second)&(1<<5) != 0
	})
	d, err := g2.Messages().Pull(prioCtx(t), second, time.Second)
	if err != nil || d == nil || string(d.Message.Body) != "p5" {
		t.Fatalf("first pull: %+v, %v; want p5", d, err)
	}
}

// TestPriorityUpgradesShard: a shard stream made by a version without
// priorities gets their subjects on first use, and its queue then serves
// priorities.
func TestPriorityUpgradesShard(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	js := testnats.JetStream(t, testnats.Connect(t, ns, "old"))
	k := mapping.Shard("old/q")
	// The shard as such a version made it (only what matters here).
	cfg := jetstream.StreamConfig{Name: mapping.ShardStream(k), Retention: jetstream.WorkQueuePolicy}
	for _, s := range mapping.ShardSubjects(k) {
		if !strings.HasPrefix(s, mapping.SubjectPrefix+".p.") {
			cfg.Subjects = append(cfg.Subjects, s)
		}
	}
	if _, err := js.CreateStream(prioCtx(t), cfg); err != nil {
		t.Fatal(err)
	}
	g := gatewayOn(t, ns, "core")
	pushP(t, g, "old/q", "p0-1", 0)
	pushP(t, g, "old/q", "p4-1", 4)
	wantOrder(t, g, "old/q", "p4-1 p0-1")
}

// BenchmarkPriorityPullAck reports what a pull+ack costs with priorities:
// JetStream pull requests per pull (req/pull) and CPU of the process, gateway
// and embedded NATS together (cpu-µs/op). "plain": priority 0 only (the path
// of a queue that never used priorities); "drain": a backlog spread over
// priorities 0..9, pulled to the end; "alternate": each pull follows a push of
// the next priority in turn (levels keep being marked and found empty);
// "alternate-plain": the same at priority 0, its baseline.
func BenchmarkPriorityPullAck(b *testing.B) {
	for _, mode := range []string{"plain", "drain", "alternate", "alternate-plain"} {
		b.Run(mode, func(b *testing.B) {
			ns := testnats.Start(b)
			g, err := New(context.Background(), bus.New(testnats.Connect(b, ns, "core")), Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			ctx := context.Background()
			push := func(i int) {
				p := i % (mapping.MaxPriority + 1)
				if mode == "plain" || mode == "alternate-plain" {
					p = 0
				}
				if _, err := g.Messages().PushWith(ctx, "bench", Message{Body: []byte("x")}, PushOptions{Priority: &p}); err != nil {
					b.Fatal(err)
				}
			}
			pullAck := func() {
				d, err := g.Messages().Pull(ctx, "bench", 5*time.Second)
				if err != nil || d == nil {
					b.Fatal(d, err)
				}
				if err := g.Messages().Reply(ctx, "bench", d.ID, Ack); err != nil {
					b.Fatal(err)
				}
			}
			push(0)
			pullAck() // the consumer exists from here on
			alternate := strings.HasPrefix(mode, "alternate")
			if !alternate {
				for i := range b.N {
					push(i)
				}
			}
			b.ResetTimer()
			reqs, cpu := g.disp.PullRequests(), time.Duration(0)
			for i := range b.N {
				if alternate {
					b.StopTimer()
					push(i)
					b.StartTimer()
				}
				c0 := processCPU()
				pullAck()
				cpu += processCPU() - c0
			}
			b.StopTimer()
			b.ReportMetric(float64(g.disp.PullRequests()-reqs)/float64(b.N), "req/pull")
			b.ReportMetric(cpu.Seconds()*1e6/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is this process's user and system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestPriorityPullAny: pull-any finds a queue holding only messages of a
// priority from the shards' subject counts (a gateway that saw no
// notification), and the queue serves its highest priority.
func TestPriorityPullAny(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	g1 := gatewayOn(t, ns, "g1")
	pushP(t, g1, "pa/x", "p2-1", 2)
	pushP(t, g1, "pa/x", "p6-1", 6)
	g2 := gatewayOn(t, ns, "g2")
	re := regexp.MustCompile(`^pa/`)
	for _, want := range []string{"p6-1", "p2-1"} {
		d, err := g2.Messages().PullAny(prioCtx(t), re, 0, nil)
		if err != nil || d == nil || string(d.Message.Body) != want {
			t.Fatalf("pull-any: %+v %v, want %s", d, err, want)
		}
		if err := g2.Messages().Reply(prioCtx(t), d.Queue, d.ID, Ack); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := g2.Messages().PullAny(prioCtx(t), re, 0, nil); d != nil || err != nil {
		t.Fatalf("pull-any after: %+v %v", d, err)
	}
	if qi, err := g2.Inspect().Queue(prioCtx(t), "pa/x"); err != nil || qi.Size != 0 {
		t.Fatalf("queue %+v %v", qi, err)
	}
}

// TestPriorityDelayed: a delayed message comes due at its own priority.
func TestPriorityDelayed(t *testing.T) {
	t.Parallel()
	g, _ := prioCore(t)
	five := 5
	if _, err := g.Messages().PushWith(prioCtx(t), "pdl", Message{Body: []byte("p5-1")}, PushOptions{Delay: 300 * time.Millisecond, Priority: &five}); err != nil {
		t.Fatal(err)
	}
	pushP(t, g, "pdl", "p0-1", 0)
	testwait.For(t, "queue size 2", func() bool {
		qi, err := g.Inspect().Queue(prioCtx(t), "pdl")
		if err != nil {
			t.Fatal(err)
		}
		return qi.Size == 2
	})
	wantOrder(t, g, "pdl", "p5-1 p0-1")
}

// TestPriorityFilledWithoutEvent: a level that fills with no event this
// gateway sees (here a NATS program's publish; after a kill -9, a delayed
// message whose wake-up died with the process) is found by the level
// sweep, although the queue never saw a priority since the gateway started.
func TestPriorityFilledWithoutEvent(t *testing.T) {
	t.Parallel()
	g, js := prioCore(t)
	const q = "psweep"
	pushP(t, g, q, "p0-1", 0)
	if got := pullOrder(t, g, q, 1); got[0] != "p0-1" {
		t.Fatalf("got %q", got)
	}
	got := make(chan *Delivery, 1)
	g.disp.TestSignals.WaiterParked.Init(t)
	go func() {
		d, err := g.Messages().Pull(prioCtx(t), q, msgWait)
		if err != nil {
			t.Error(err)
		}
		got <- d
	}()
	waitParkedOn(g, q)
	if _, err := js.Publish(prioCtx(t), mapping.PrioritySubject(q, 7), []byte("native p7")); err != nil {
		t.Fatal(err)
	}
	d := <-got
	if d == nil || string(d.Message.Body) != "native p7" || d.Priority != 7 {
		t.Fatalf("waiting pull got %+v, want the native priority-7 message", d)
	}
}

// waitParkedOn waits for a pull that may wait to register on queue's
// dispatcher at g (g.disp.TestSignals.WaiterParked on before the pull
// started).
func waitParkedOn(g *Gateway, queue string) {
	g.disp.TestSignals.WaiterParked.WaitFor("a pull waiting on "+queue, func(p dispatch.Parked) bool {
		return p.Queue == queue && !p.NoWait
	})
}
