package gateway

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// groupLog checks what the clients of a grouped queue saw: within each
// group, deliveries strictly in push order (a delivery of message k only
// once k-1 was acked) and never two at once.
type groupLog struct {
	mu       sync.Mutex
	holding  map[string]int // group → message index held now (-1: none)
	acked    map[string]int // group → highest index acked
	parallel int            // most groups held at one moment
	errs     []string
}

func newGroupLog() *groupLog {
	return &groupLog{holding: map[string]int{}, acked: map[string]int{}}
}

func (l *groupLog) got(group string, k int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.holding[group]; ok && h >= 0 {
		l.errs = append(l.errs, fmt.Sprintf("group %s: message %d handed out while %d is held", group, k, h))
	}
	last, ok := l.acked[group]
	if !ok {
		last = -1
	}
	if k != last+1 {
		l.errs = append(l.errs, fmt.Sprintf("group %s: message %d handed out after %d was acked", group, k, last))
	}
	l.holding[group] = k
	n := 0
	for _, h := range l.holding {
		if h >= 0 {
			n++
		}
	}
	l.parallel = max(l.parallel, n)
}

func (l *groupLog) let(group string, k int, acked bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holding[group] == k {
		l.holding[group] = -1
	}
	if acked {
		l.acked[group] = k
	}
}

// Three groups of twenty messages, eight clients acking, nacking and letting
// deliveries time out at random, over two gateways: each group's messages
// come strictly in push order, one at a time, while the groups progress in
// parallel; ungrouped messages are not held up by a busy group.
func TestGroupsOrderedOneAtATime(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	a, b := gatewayOn(t, ns, "a"), gatewayOn(t, ns, "b")
	ctx := prioCtx(t)
	groups := []string{"red", "green", "blue"}

	// In parallel and one at a time, by hand first: with two messages in
	// each group and an ungrouped one, four pulls through both gateways
	// hold the three heads and the ungrouped message at once, and a fifth
	// finds nothing. (How many groups the random clients below happen to
	// hold at once is the scheduler's doing: logged, not asserted.)
	setProps(t, a, "gpar", `{"timeout":60}`)
	for k := range 2 {
		for _, grp := range groups {
			if _, err := a.Messages().PushWith(ctx, "gpar", Message{Body: []byte(grp + ":" + strconv.Itoa(k))}, PushOptions{Group: grp}); err != nil {
				t.Fatal(err)
			}
		}
	}
	pushP(t, a, "gpar", "plain", -1)
	gws := []*Gateway{a, b}
	held := map[string]*Delivery{}
	for i := range len(groups) + 1 {
		d := pullP(t, gws[i%2], "gpar")
		held[string(d.Message.Body)] = d
	}
	for _, want := range []string{"red:0", "green:0", "blue:0", "plain"} {
		if held[want] == nil {
			t.Fatalf("four pulls held %v; want each group's head and the ungrouped message", slices.Sorted(maps.Keys(held)))
		}
	}
	for _, g := range gws {
		if d, err := g.Messages().Pull(ctx, "gpar", 0); d != nil || err != nil {
			t.Fatalf("a pull while every group's head is held got %v (%v)", d, err)
		}
	}
	for _, d := range held {
		if err := a.Messages().Reply(ctx, "gpar", d.ID, Ack); err != nil {
			t.Fatal(err)
		}
	}

	setProps(t, a, "gq", `{"timeout":0.5,"retry":100}`)
	const per = 20
	for k := 0; k < per; k++ {
		for _, grp := range groups {
			if _, err := a.Messages().PushWith(ctx, "gq", Message{Body: []byte(grp + ":" + strconv.Itoa(k))}, PushOptions{Group: grp}); err != nil {
				t.Fatal(err)
			}
		}
	}
	pushP(t, a, "gq", "plain", -1)
	// A group's head is a copy: the queue's size counts each message once.
	if info, err := a.Inspect().Queue(ctx, "gq"); err != nil || info.Size != per*uint64(len(groups))+1 {
		t.Fatalf("queue info = %+v, %v; want size %d", info, err, per*len(groups)+1)
	}
	log := newGroupLog()
	var wg sync.WaitGroup
	var mu sync.Mutex
	done, plain := 0, false
	finished := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return done == per*len(groups) && plain
	}
	for c := 0; c < 8; c++ {
		g := a
		if c%2 == 1 {
			g = b
		}
		rng := rand.New(rand.NewPCG(uint64(c), 7))
		wg.Go(func() {
			for !finished() {
				d, err := g.Messages().Pull(ctx, "gq", time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				if d == nil {
					continue
				}
				if d.Group == "" {
					mu.Lock()
					plain = true
					mu.Unlock()
					_ = g.Messages().Reply(ctx, "gq", d.ID, Ack)
					continue
				}
				grp, ks, _ := strings.Cut(string(d.Message.Body), ":")
				k, _ := strconv.Atoi(ks)
				if grp != d.Group {
					t.Errorf("delivery of %q says group %q", d.Message.Body, d.Group)
				}
				log.got(grp, k)
				// Held a random while: a few turns of the scheduler, so that
				// other clients take other groups' heads meanwhile.
				for range rng.IntN(8) {
					runtime.Gosched()
				}
				switch x := rng.IntN(10); {
				case x == 0: // nack
					log.let(grp, k, false)
					if err := g.Messages().Reply(ctx, "gq", d.ID, Nack); err != nil {
						t.Error(err)
					}
				case x == 1: // let it time out
					log.let(grp, k, false)
				default:
					// Released to the log before the ack is sent: the next
					// message may come the moment the ack is applied.
					log.let(grp, k, true)
					if err := g.Messages().Reply(ctx, "gq", d.ID, Ack); err != nil {
						t.Errorf("ack %s:%d: %v", grp, k, err)
						continue
					}
					mu.Lock()
					done++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for _, e := range log.errs {
		t.Error(e)
	}
	t.Logf("at most %d groups held at once by the random clients", log.parallel)
	_ = context.Background
}

// A group's message stored with no head (a gateway stopped between a head's
// end and the next one's copy; here a NATS program publishing by hand) is
// found by the sweep when a gateway makes the queue's consumer, and handed
// out.
func TestGroupWithoutHeadIsSwept(t *testing.T) {
	ns := testnats.Start(t)
	g := gatewayOn(t, ns, "core")
	nc := testnats.Connect(t, ns, "program")
	js := testnats.JetStream(t, nc)
	ctx := prioCtx(t)
	pushP(t, g, "gs", "first", -1) // the queue and its shard exist
	m := nats.NewMsg(mapping.GroupSubject("gs", "by-hand"))
	m.Header.Set(mapping.HdrGroup, "by-hand")
	m.Data = []byte("stranded")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for range 2 {
		d, err := g.Messages().Pull(ctx, "gs", msgWait)
		if err != nil || d == nil {
			t.Fatalf("pull: %v, %v (seen %v)", d, err, seen)
		}
		seen[string(d.Message.Body)] = d.Group
		if err := g.Messages().Reply(ctx, "gs", d.ID, Ack); err != nil {
			t.Fatal(err)
		}
	}
	if grp, ok := seen["stranded"]; !ok || grp != "by-hand" {
		t.Fatalf("delivered %v; want the stranded message of group by-hand", seen)
	}
}

// queueConsumerReadsHeads reports whether queue's own consumer reads its
// groups' head subjects.
func queueConsumerReadsHeads(t *testing.T, js jetstream.JetStream, queue string) bool {
	t.Helper()
	c, err := js.Consumer(prioCtx(t), mapping.StreamName(queue), mapping.ConsumerName(queue))
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.CachedInfo().Config
	return slices.Contains(cfg.FilterSubjects, mapping.HeadWildcard(queue))
}

// A queue used without groups has a consumer reading its own subject only
// (store/consumers.go, "Group heads"); its first grouped push, through the
// gateway that made the consumer or through another one, gives it the head
// subjects before the head is stored, and the group's messages come out in
// order; the consumer never loses them again (a property change updates
// it).
func TestGroupsAfterPlainUse(t *testing.T) {
	ns := testnats.Start(t)
	a, b := gatewayOn(t, ns, "a"), gatewayOn(t, ns, "b")
	js := testnats.JetStream(t, testnats.Connect(t, ns, "look"))
	ctx := prioCtx(t)
	for i, g := range []*Gateway{a, b} {
		queue := fmt.Sprintf("plain-then-grouped-%d", i)
		pushP(t, a, queue, "plain", -1)
		d := pullP(t, a, queue)
		if err := a.Messages().Reply(ctx, queue, d.ID, Ack); err != nil {
			t.Fatal(err)
		}
		if queueConsumerReadsHeads(t, js, queue) {
			t.Fatalf("%s: the consumer of a queue without groups reads the head subjects", queue)
		}
		for k := range 3 {
			if _, err := g.Messages().PushWith(ctx, queue, Message{Body: []byte(strconv.Itoa(k))}, PushOptions{Group: "g"}); err != nil {
				t.Fatal(err)
			}
		}
		if !queueConsumerReadsHeads(t, js, queue) {
			t.Fatalf("%s: a grouped push left the consumer without the head subjects", queue)
		}
		for k := range 3 {
			d := pullP(t, a, queue)
			if string(d.Message.Body) != strconv.Itoa(k) || d.Group != "g" {
				t.Fatalf("%s: pulled %q of group %q; want %d of g", queue, d.Message.Body, d.Group, k)
			}
			if err := a.Messages().Reply(ctx, queue, d.ID, Ack); err != nil {
				t.Fatal(err)
			}
		}
		setProps(t, b, queue, `{"max_inflight":5}`)
		pushP(t, b, queue, "again", -1)
		pullP(t, a, queue)
		if !queueConsumerReadsHeads(t, js, queue) {
			t.Fatalf("%s: an update took the head subjects away", queue)
		}
	}
}

// A head stored while the queue's consumer did not read the head subjects
// (by a gateway of an older version, here a NATS program copying it by
// hand), which the consumer then looked past, is stored again behind it by
// the group sweep and handed out.
func TestHeadStoredWithoutHeadSubjects(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	g := gatewayOn(t, ns, "core")
	js := testnats.JetStream(t, testnats.Connect(t, ns, "program"))
	ctx := prioCtx(t)
	const queue = "old-head"
	pushP(t, g, queue, "plain", -1)
	d := pullP(t, g, queue)
	if err := g.Messages().Reply(ctx, queue, d.ID, Ack); err != nil {
		t.Fatal(err)
	}
	if queueConsumerReadsHeads(t, js, queue) {
		t.Fatal("the consumer of a queue without groups reads the head subjects")
	}
	backlog := nats.NewMsg(mapping.GroupSubject(queue, "old"))
	backlog.Header.Set(mapping.HdrGroup, "old")
	backlog.Data = []byte("grouped")
	ack, err := js.PublishMsg(ctx, backlog)
	if err != nil {
		t.Fatal(err)
	}
	head := nats.NewMsg(mapping.HeadSubject(queue, "old"))
	head.Header.Set(mapping.HdrGroup, "old")
	head.Header.Set(mapping.HdrGroupSeq, strconv.FormatUint(ack.Sequence, 10))
	head.Data = []byte("grouped")
	if _, err := js.PublishMsg(ctx, head); err != nil {
		t.Fatal(err)
	}
	// The consumer looks past the head (an empty pull), then a plain message.
	if d, err := g.Messages().Pull(ctx, queue, 0); err != nil || d != nil {
		t.Fatalf("pull: %v, %v; want nothing", d, err)
	}
	pushP(t, g, queue, "after", -1)
	seen := map[string]string{}
	for range 2 {
		d, err := g.Messages().Pull(ctx, queue, msgWait)
		if err != nil || d == nil {
			t.Fatalf("pull: %v, %v (seen %v)", d, err, seen)
		}
		seen[string(d.Message.Body)] = d.Group
		if err := g.Messages().Reply(ctx, queue, d.ID, Ack); err != nil {
			t.Fatal(err)
		}
	}
	if grp, ok := seen["grouped"]; !ok || grp != "old" {
		t.Fatalf("delivered %v; want the head of group old", seen)
	}
}
