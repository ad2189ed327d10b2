package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// Queue control (issue 27) as a client sees it: pause, max_inflight and
// ordered groups. (Purge and the one-message routes have their own files.)

// asyncPull runs a request on its own goroutine; its answer arrives on the
// returned channel.
func asyncPull(c *Client, path string) <-chan *Response {
	out := make(chan *Response, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		r, err := c.Send(ctx, http.MethodGet, path, nil)
		if err != nil {
			r = &Response{Status: -1, Body: []byte(err.Error())}
		}
		out <- r
	}()
	return out
}

// A paused queue stores pushes and hands nothing out: t=0 answers 204, a
// long-poll and a pull-any keep waiting; a delivery taken before the pause
// can still be acked; resuming wakes both waiting pulls at once. The
// property shows in GET /properties only while set.
func TestPauseHoldsPullsAndResumeWakesThem(t *testing.T) {
	t.Parallel()
	_, c := StartClient(t)
	const q = "ctl-pause"
	c.Push(q, []byte("before"), "text/plain")
	held := c.MustPull(q, "0", "before")
	c.PatchProps(q, `{"paused":true}`)
	if p := c.Props(q); !strings.Contains(p, `"paused":true`) {
		t.Fatalf("properties of a paused queue = %s", p)
	}
	c.Push(q, []byte("m1"), "text/plain")
	c.Push(q, []byte("m2"), "text/plain")
	c.PullEmpty(q, "0")
	c.ExpectReply(http.StatusNoContent, q, held.ID(), "ack")

	long := asyncPull(c, "/messages/"+Q(q)+"?t=60")
	anyPull := asyncPull(c, "/messages?qre="+url.QueryEscape("^ctl-pau")+"&t=60")
	awaitWaitingPulls(t, c, 2)
	select {
	case r := <-long:
		t.Fatalf("a long-poll of a paused queue was answered %v", r)
	case r := <-anyPull:
		t.Fatalf("a pull-any over a paused queue was answered %v", r)
	default:
	}
	c.PatchProps(q, `{"paused":false}`)
	got := map[string]bool{}
	for _, ch := range []<-chan *Response{long, anyPull} {
		r := <-ch
		if r.Status != http.StatusOK {
			t.Fatalf("after resume a waiting pull got %v", r)
		}
		got[string(r.Body)] = true
	}
	if !got["m1"] || !got["m2"] {
		t.Fatalf("after resume the waiting pulls got %v, want m1 and m2", got)
	}
	// Shown only while true, like dead_letter: a resumed queue reads as
	// LMQ's text again.
	if p := c.Props(q); p != `{"accum":0,"retry":2,"timeout":30}` {
		t.Fatalf("properties after resume = %s", p)
	}
	// A queue never paused shows nothing new (LMQ's exact text).
	if p := c.Props("ctl-plain"); p != `{"accum":0,"retry":2,"timeout":30}` {
		t.Fatalf("properties of a plain queue = %s", p)
	}
}

// max_inflight=2: with two deliveries held, through either gateway, a pull
// finds nothing though messages wait, until one is acked; five clients
// pulling through two gateways never hold more than two deliveries of the
// queue at once; every message is delivered.
func TestMaxInflightTwoGateways(t *testing.T) {
	t.Parallel()
	url := StartNATS(t)
	gws := []*Gateway{StartWithNATS(t, url), StartWithNATS(t, url)}
	c0, c1 := gws[0].Client(t), gws[1].Client(t)

	// The limit by hand (how long the clients below hold a delivery is the
	// network's and the scheduler's doing, so how close they come to it is
	// luck).
	const q1 = "ctl-limit-1"
	c0.PatchProps(q1, `{"max_inflight":2,"timeout":60}`)
	for i := range 4 {
		c0.Push(q1, []byte(strconv.Itoa(i)), "text/plain")
	}
	d0, d1 := c0.MustPull(q1, msgWait, "0"), c1.MustPull(q1, msgWait, "1")
	c0.PullEmpty(q1, "0")
	c1.PullEmpty(q1, "0")
	c1.ExpectReply(http.StatusNoContent, q1, d0.ID(), "ack")
	d2 := c1.MustPull(q1, msgWait, "2") // a slot is free again
	c0.ExpectReply(http.StatusNoContent, q1, d1.ID(), "ack")
	c0.ExpectReply(http.StatusNoContent, q1, d2.ID(), "ack")

	const q, n = "ctl-limit", 40
	c0.PatchProps(q, `{"max_inflight":2,"timeout":30}`)
	for i := range n {
		c0.Push(q, []byte(strconv.Itoa(i)), "text/plain")
	}
	var holding, peak, acked atomic.Int32
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for k := range 5 {
		c := gws[k%2].Client(t)
		wg.Go(func() {
			for acked.Load() < n && ctx.Err() == nil {
				r, err := c.Send(ctx, http.MethodGet, "/messages/"+Q(q)+"?t=1", nil)
				switch {
				case err != nil:
					if ctx.Err() == nil {
						t.Errorf("pull: %v", err)
					}
					return
				case r.Status == http.StatusNoContent:
					continue // nothing for this one: the other clients hold the two
				case r.Status != http.StatusOK:
					t.Errorf("pull: %v, want 200 or 204", r)
					return
				}
				h := holding.Add(1)
				for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
				}
				holding.Add(-1)
				a, err := c.Send(ctx, http.MethodPost, "/messages/"+Q(q)+"/"+r.ID()+"?reply=ack", nil)
				if err != nil || a.Status != http.StatusNoContent {
					t.Errorf("ack: %v %v", a, err)
					return
				}
				acked.Add(1)
			}
		})
	}
	wg.Wait()
	if acked.Load() != n {
		t.Fatalf("acked %d of %d", acked.Load(), n)
	}
	if p := peak.Load(); p > 2 {
		t.Fatalf("%d deliveries were held at once; max_inflight is 2", p)
	}
	if p := c0.Props(q); !strings.Contains(p, `"max_inflight":2`) {
		t.Fatalf("properties = %s", p)
	}
}

// groupLedger checks, across a kill of the gateway, what the clients of
// a grouped queue saw: within each group deliveries strictly in push order
// (message k only once k-1 was acked) and never two at once. An ack whose
// answer the kill cut may or may not have taken effect: the next delivery
// of its group may then be either message.
type groupLedger struct {
	mu      sync.Mutex
	epoch   int            // bumped at the kill: deliveries before it are void
	holding map[string]int // group → message held (-1: none)
	acked   map[string]int // group → last message acked with 204
	maybe   map[string]int // group → message whose ack was cut (-1: none)
	busy    int            // most groups held at one moment
	errs    []string
	// up is closed while the gateway runs; a fresh one is made before the
	// kill and closed once the gateway is back, so that a worker whose
	// request failed waits for that instead of retrying blind.
	up chan struct{}
	// unavailable counts pulls answered 503 (the gateway recovering after
	// its restart: a client retries).
	unavailable int
}

func newGroupLedger(groups []string) *groupLedger {
	up := make(chan struct{})
	close(up)
	l := &groupLedger{holding: map[string]int{}, acked: map[string]int{}, maybe: map[string]int{}, up: up}
	for _, g := range groups {
		l.holding[g], l.acked[g], l.maybe[g] = -1, -1, -1
	}
	return l
}

func (l *groupLedger) now() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// got records a delivery of message k of group g by a request sent in
// epoch; false when the kill came meanwhile (the delivery is void).
func (l *groupLedger) got(epoch int, g string, k int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if epoch != l.epoch {
		return false
	}
	if h := l.holding[g]; h >= 0 {
		l.errs = append(l.errs, fmt.Sprintf("group %s: message %d handed out while %d is held", g, k, h))
	}
	switch last := l.acked[g]; {
	case k == last+1:
	case k == last+2 && l.maybe[g] == last+1:
		l.acked[g], l.maybe[g] = last+1, -1 // the cut ack did take effect
	default:
		l.errs = append(l.errs, fmt.Sprintf("group %s: message %d handed out after %d was acked", g, k, last))
	}
	l.holding[g] = k
	n := 0
	for _, h := range l.holding {
		if h >= 0 {
			n++
		}
	}
	l.busy = max(l.busy, n)
	return true
}

// drop notes that the client no longer holds message k (nack, left to time
// out, or an ack about to be sent).
func (l *groupLedger) drop(g string, k int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holding[g] == k {
		l.holding[g] = -1
	}
}

func (l *groupLedger) ackSent(g string, k int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop0(g, k)
	l.maybe[g] = k
}

func (l *groupLedger) drop0(g string, k int) {
	if l.holding[g] == k {
		l.holding[g] = -1
	}
}

func (l *groupLedger) ackAnswered(g string, k int, status int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.maybe[g] == k {
		l.maybe[g] = -1
	}
	if status == http.StatusNoContent {
		l.acked[g] = max(l.acked[g], k)
	}
}

// down is called before the gateway is killed: workers whose requests
// fail from now on wait for back.
func (l *groupLedger) down() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.up = make(chan struct{})
}

// back is called once the gateway runs again.
func (l *groupLedger) back() {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.up)
}

// running is closed while the gateway runs (see up).
func (l *groupLedger) running() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up
}

// problem records something the clients must not see.
func (l *groupLedger) problem(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

// kill voids every delivery held: the process that handed them out is gone.
func (l *groupLedger) kill() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epoch++
	for g := range l.holding {
		l.holding[g] = -1
	}
}

// done reports whether every group's last message was acked (or its ack
// was cut by the kill and it never came back).
func (l *groupLedger) done(last int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for g, a := range l.acked {
		if a != last && l.maybe[g] != last {
			return false
		}
	}
	return true
}

// Three groups of twenty messages, eight clients acking, nacking and
// letting deliveries time out at random, and a kill -9 of the gateway in
// the middle: within each group the deliveries are strictly in push order
// and never two at once, an ungrouped message is not held up, and after
// the restart every message is delivered (nothing lost, the order kept).
// Deliveries carry x-lmq-group.
func TestGroupsInOrderAcrossAKill(t *testing.T) {
	heavy(t, "a kill of the gateway")
	t.Parallel()
	gw, c := StartClient(t)
	const q, per = "ctl-groups", 20
	groups := []string{"order-1", "order-2", "order-3"}
	c.PatchProps(q, `{"timeout":1,"retry":100}`)
	for k := range per {
		for _, g := range groups {
			c.Expect(http.StatusOK, http.MethodPost, "/messages/"+Q(q)+"?group="+url.QueryEscape(g), []byte(g+":"+strconv.Itoa(k)))
		}
	}
	c.Push(q, []byte("plain"), "text/plain")
	led := newGroupLedger(groups)
	var plain atomic.Bool
	var acks atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for w := range 8 {
		wc := gw.Client(t)
		rng := rand.New(rand.NewPCG(uint64(w), 27))
		wg.Go(func() { groupWorker(ctx, wc, q, led, rng, &plain, &acks) })
	}
	testwait.Within(t, 3*time.Minute, "a third of the messages acked", func() bool { return acks.Load() >= per })
	led.down()
	gw.Kill()
	led.kill()
	gw.Restart()
	led.back()
	testwait.WithinDetail(t, 3*time.Minute, "every group's messages acked", func() (bool, string) {
		led.mu.Lock()
		detail := fmt.Sprintf("acked %v, cut %v, errors %d", led.acked, led.maybe, len(led.errs))
		led.mu.Unlock()
		return led.done(per-1) && plain.Load(), detail
	})
	cancel()
	wg.Wait()
	for _, e := range led.errs {
		t.Error(e)
	}
	// How many groups the clients happened to hold at once is the
	// network's and the scheduler's doing: a figure. That the groups do
	// progress in parallel, TestGroupsOverRPCAndRules shows by hand.
	t.Logf("%d acks answered 204; at most %d groups held at once; %d pulls answered 503 (recovering)", acks.Load(), led.busy, led.unavailable)
	c.PullEmpty(q, "0")
}

// groupWorker pulls from q until ctx ends, answering each delivery at
// random: mostly ack, sometimes nack, sometimes nothing (its timeout).
func groupWorker(ctx context.Context, c *Client, q string, led *groupLedger, rng *rand.Rand, plain *atomic.Bool, acks *atomic.Int32) {
	for ctx.Err() == nil {
		epoch := led.now()
		r, err := c.Send(ctx, http.MethodGet, "/messages/"+Q(q)+"?t=1", nil)
		if err != nil {
			// The gateway is down: try again once it runs.
			select {
			case <-ctx.Done():
			case <-led.running():
			}
			continue
		}
		switch r.Status {
		case http.StatusOK:
		case http.StatusNoContent:
			continue
		case http.StatusServiceUnavailable:
			led.mu.Lock()
			led.unavailable++
			led.mu.Unlock()
			continue
		default:
			led.problem("pull: %v, want 200, 204 or 503", r)
			continue
		}
		g, ks, _ := strings.Cut(string(r.Body), ":")
		if r.Header.Get("x-lmq-group") != g && g != "plain" {
			led.problem("delivery of %q has x-lmq-group %q", r.Body, r.Header.Get("x-lmq-group"))
		}
		reply := func(kind string) (int, error) {
			a, err := c.Send(ctx, http.MethodPost, "/messages/"+Q(q)+"/"+r.ID()+"?reply="+kind, nil)
			if err != nil {
				return 0, err
			}
			return a.Status, nil
		}
		if g == "plain" {
			if st, err := reply("ack"); err == nil && st == http.StatusNoContent {
				plain.Store(true)
			}
			continue
		}
		k, _ := strconv.Atoi(ks)
		if !led.got(epoch, g, k) {
			continue
		}
		switch x := rng.IntN(10); {
		case x == 0:
			led.drop(g, k)
			_, _ = reply("nack")
		case x == 1:
			led.drop(g, k) // left to time out
		default:
			led.ackSent(g, k)
			st, err := reply("ack")
			if err != nil {
				continue // cut by the kill: maybe acked
			}
			led.ackAnswered(g, k, st)
			if st == http.StatusNoContent {
				acks.Add(1)
			}
		}
	}
}

// Groups over RPC: the push option group, the delivery's group key, the
// rules (no delay, no priority with a group; bad names), and a group's next
// message only after its head is acked while another group and an
// ungrouped message go on.
func TestGroupsOverRPCAndRules(t *testing.T) {
	t.Parallel()
	gw, c := StartClient(t)
	const q = "ctl-grpc"
	rpc := dialRPC(t, gw.RPCAddr)
	rpc.MustOK("push", q, "a1", map[string]any{"group": "a"})
	rpc.MustOK("push", q, "a2", map[string]any{"group": "a"})
	rpc.MustOK("push", q, "b1", map[string]any{"group": "b"})
	rpc.MustOK("push", q, "plain")
	for _, bad := range []map[string]any{
		{"group": "a", "delay": 1}, {"group": "a", "priority": 3}, {"group": ""}, {"group": 7},
		{"group": strings.Repeat("g", 257)}, {"group": "tab\there"},
	} {
		if msg := rpc.MustFail("push", q, "x", bad); msg == "" {
			t.Fatalf("push with %v accepted", bad)
		}
	}
	c.Expect(http.StatusBadRequest, http.MethodPost, "/messages/"+Q(q)+"?group=a&delay=1", []byte("x"))
	c.Expect(http.StatusBadRequest, http.MethodPost, "/messages/"+Q(q)+"?group=a&priority=1", []byte("x"))
	c.Expect(http.StatusBadRequest, http.MethodPost, "/messages/"+Q(q)+"?group=", []byte("x"))
	c.Expect(http.StatusBadRequest, http.MethodPost, "/messages/"+Q(q)+"?group=a&batch=1", []byte("x"), "Content-Type", "multipart/mixed; boundary=b")

	// a1, b1 and plain are available; a2 waits for a1.
	pull := func(wait int) (body, group, id string, ok bool) {
		t.Helper()
		m, isMap := rpc.Must("pull", q, wait).(mpMap)
		if !isMap {
			return "", "", "", false
		}
		content, _ := m.get("content")
		g, _ := m.get("group")
		idv, _ := m.get("id")
		body = fmt.Sprint(content)
		group, _ = g.(string)
		id, _ = idv.(string)
		return body[max(0, len(body)-5):], group, id, true
	}
	ids := map[string]string{}
	for range 3 {
		body, group, id, ok := pull(5)
		if !ok {
			t.Fatal("pull: no message")
		}
		switch {
		case strings.HasSuffix(body, "a1") && group == "a", strings.HasSuffix(body, "b1") && group == "b",
			strings.HasSuffix(body, "plain") && group == "":
			ids[body[len(body)-2:]] = id
		default:
			t.Fatalf("pulled %q with group %q", body, group)
		}
	}
	if _, _, _, ok := pull(0); ok {
		t.Fatal("a2 was handed out while a1 is in flight")
	}
	rpc.MustOK("done", q, ids["a1"])
	if body, group, _, ok := pull(5); !ok || !strings.HasSuffix(body, "a2") || group != "a" {
		t.Fatalf("after a1's ack: %q group %q, want a2 of group a", body, group)
	}
}
