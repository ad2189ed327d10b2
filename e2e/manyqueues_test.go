package e2e

// Many queues (issue 13), black box over HTTP: whatever JetStream layout the
// gateway uses, thousands of queues are created, survive a restart and a
// node loss, are found by pull-any, and a queue deleted and re-created among
// busy ones starts empty. The tests assert counts, never times.
//
// Scale and CI time: TestManyQueuesRestart uses 10,000 queues,
// TestManyQueuesCluster 2,000, TestManyQueuesPullAny 3,000; each 200 under
// -short, still several queues on every one of the 64 shard streams
// (mapping.ShardCount), which is what the inner loop needs of them. With
// the layout of issue 13 (queues as subjects of shard streams, > 2,000
// queues/s created) the 10,000-queue test took 29 s on the 2-core machine
// at a load of ~10, with the pull-any and delete tests running alongside
// (28–30 s each); it pulls 1,000 of the queues back (mqPullSample), the
// listing accounts for all. The
// one-stream-per-queue layout before it creates ~190 queues/s and restarts
// 10,000 queues in ~150 s: run it there with smaller counts, e.g.
// LMQ_E2E_MANY_QUEUES=1000 LMQ_E2E_CLUSTER_QUEUES=100.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// mqCount is the queue count of a many-queue test: full normally, short
// under -short, env (a positive integer) when set.
func mqCount(t *testing.T, env string, full, short int) int {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: not a positive integer", env, v)
		}
		return n
	}
	if testing.Short() {
		return short
	}
	return full
}

// mqClients is how many requests the many-queue tests have in flight.
const mqClients = 16

// mqDeadline bounds a many-queue phase (creating, restarting, listing,
// draining): generous, it is only reached when something is wrong.
const mqDeadline = 5 * time.Minute

// mqPush pushes body to the queue and returns an error unless 200.
func mqPush(c *Client, name, body string) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	return c.TryPush(ctx, name, []byte(body), "Content-Type", "text/plain")
}

// mqPullAck pulls one message of the queue (waiting up to wait seconds),
// acks it, and returns its body; "" and no error when the pull answered 204.
func mqPullAck(c *Client, name, wait string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	r, err := c.Send(ctx, http.MethodGet, "/messages/"+Q(name)+"?t="+wait, nil)
	if err != nil {
		return "", fmt.Errorf("pull %q: %w", name, err)
	}
	switch {
	case r.Status == http.StatusNoContent:
		return "", nil
	case r.Status != http.StatusOK:
		return "", fmt.Errorf("pull %q: %v", name, r)
	case r.Header.Get(hQueue) != name:
		return "", fmt.Errorf("pull %q: answered for queue %q", name, r.Header.Get(hQueue))
	}
	if err := mqAck(c, name, r.ID()); err != nil {
		return "", err
	}
	return string(r.Body), nil
}

func mqAck(c *Client, name, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	a, err := c.Send(ctx, http.MethodPost, "/messages/"+Q(name)+"/"+url.PathEscape(id)+"?reply=ack", nil)
	if err != nil {
		return fmt.Errorf("ack on %q: %w", name, err)
	}
	if a.Status != http.StatusNoContent {
		return fmt.Errorf("ack on %q: %v", name, a)
	}
	return nil
}

// mqListed reads GET /queues and returns the sizes of the queues whose names
// start with prefix; a queue listed without a size (its stream not
// answering) is an error.
func mqListed(c *Client, prefix string) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), mqDeadline)
	defer cancel()
	r, err := c.Send(ctx, http.MethodGet, "/queues", nil)
	if err != nil {
		return nil, fmt.Errorf("GET /queues: %w", err)
	}
	if r.Status != http.StatusOK {
		return nil, fmt.Errorf("GET /queues: %v", r)
	}
	var doc struct {
		Queues []struct {
			Name  string `json:"name"`
			Size  *int   `json:"size"`
			Error string `json:"error"`
		} `json:"queues"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		return nil, fmt.Errorf("GET /queues: %w", err)
	}
	sizes := map[string]int{}
	for _, q := range doc.Queues {
		if !strings.HasPrefix(q.Name, prefix) {
			continue
		}
		if q.Size == nil {
			return nil, fmt.Errorf("GET /queues: %q listed without a size (%s)", q.Name, q.Error)
		}
		sizes[q.Name] = *q.Size
	}
	return sizes, nil
}

// mqExpectListed polls GET /queues until it lists every queue of want with
// its size (and no other queue of the prefix), and fails the test if that
// does not happen within mqDeadline.
func mqExpectListed(t *testing.T, c *Client, prefix string, want map[string]int) {
	t.Helper()
	var last string
	ok := testwait.Until(mqDeadline, func() bool {
		got, err := mqListed(c, prefix)
		if err != nil {
			last = err.Error()
			return false
		}
		var wrong []string
		for name, n := range want {
			if got[name] != n {
				wrong = append(wrong, fmt.Sprintf("%q size %d, want %d", name, got[name], n))
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				wrong = append(wrong, fmt.Sprintf("unexpected %q", name))
			}
		}
		if len(wrong) == 0 {
			return true
		}
		last = fmt.Sprintf("%d of %d queues listed; %d differences, e.g. %s", len(got), len(want), len(wrong), wrong[0])
		return false
	})
	if !ok {
		t.Fatalf("GET /queues after %v: %s", mqDeadline, last)
	}
}

// restartPatiently stops the gateway (SIGTERM) and starts it again on the
// same data directory and ports, waiting up to mqDeadline for /readyz (the
// harness's Restart waits startTimeout, which a layout that loads every
// queue at start-up may need more than). It returns the time from the
// start of the process to its first 200.
func restartPatiently(t *testing.T, g *Gateway) time.Duration {
	t.Helper()
	g.Stop()
	g.pinPorts()
	start := time.Now()
	launchGateway(g, nil)
	testwait.Within(t, mqDeadline, "lmq-gateway ready after the restart", func() bool {
		select {
		case <-g.proc.exited:
			t.Fatalf("lmq-gateway exited during the restart (%v):\n%s", g.proc.err, g.Output())
		default:
		}
		return g.answers(context.Background(), "/readyz")
	})
	took := time.Since(start)
	g.adoptNATSURL()
	return took
}

// TestManyQueuesRestart: 10,000 queues (200 under -short) with one message
// each are created by their first push, listed, and still all there, each
// with its message, after a restart.
func TestManyQueuesRestart(t *testing.T) {
	t.Parallel()
	n := mqCount(t, "LMQ_E2E_MANY_QUEUES", 10_000, 200)
	g, c := StartClient(t)
	const prefix = "many/"
	names := make([]string, n)
	want := make(map[string]int, n)
	for i := range names {
		// Names with structure, and a long one now and then.
		names[i] = fmt.Sprintf("%s%03d/%d", prefix, i%1000, i)
		if i%997 == 0 {
			names[i] += "/" + strings.Repeat("x", 200)
		}
		want[names[i]] = 1
	}
	body := func(i int) string { return "message of " + strconv.Itoa(i) }

	start := time.Now()
	if err := concurrently(n, mqClients, func(_ context.Context, i int) error { return mqPush(c, names[i], body(i)) }); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d queues created by their first push in %v", n, time.Since(start).Round(time.Millisecond))
	mqExpectListed(t, c, prefix, want)

	took := restartPatiently(t, g)
	t.Logf("restart with %d queues: /readyz 200 after %v", n, took.Round(time.Millisecond))
	mqExpectListed(t, c, prefix, want)

	// The listing accounted for every message; pulls check the contents of
	// up to mqPullSample queues spread over all (a first pull makes a queue
	// active, which costs the gateway, and CI time is bounded).
	step := mqStep(n)
	for i := 0; i < n; i += step {
		want[names[i]] = 0
	}
	start = time.Now()
	err := concurrently((n+step-1)/step, mqClients, func(_ context.Context, k int) error {
		i := k * step
		got, err := mqPullAck(c, names[i], msgWait)
		if err != nil {
			return err
		}
		if got != body(i) {
			return fmt.Errorf("queue %q: got %q, want %q", names[i], got, body(i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d messages (every %d. queue) pulled and acked after the restart in %v", (n+step-1)/step, step, time.Since(start).Round(time.Millisecond))
	mqExpectListed(t, c, prefix, want)
}

// mqPullSample bounds how many queues of a many-queue test are pulled to
// check their contents.
const mqPullSample = 1000

// mqStep is the stride over n queues that pulls at most mqPullSample.
func mqStep(n int) int { return max(1, (n+mqPullSample-1)/mqPullSample) }

// TestManyQueuesPullAny: a pull-any whose regexp matches thousands of empty
// queues waits, and returns the message pushed to any one of them (the
// first, the last, random ones); a pull-any that must not wait answers 204
// while they are all empty.
func TestManyQueuesPullAny(t *testing.T) {
	t.Parallel()
	n := mqCount(t, "LMQ_E2E_PULLANY_QUEUES", 3000, 200)
	_, c := StartClient(t)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("any/%d/x", i)
	}
	// Half the queues are created by a pull that does not wait, half by a
	// push whose message is then taken: both leave an empty queue.
	err := concurrently(n, mqClients, func(_ context.Context, i int) error {
		if i%2 == 0 {
			got, err := mqPullAck(c, names[i], "0")
			if err == nil && got != "" {
				err = fmt.Errorf("new queue %q handed out %q", names[i], got)
			}
			return err
		}
		if err := mqPush(c, names[i], "first"); err != nil {
			return err
		}
		got, err := mqPullAck(c, names[i], msgWait)
		if err == nil && got != "first" {
			err = fmt.Errorf("queue %q: got %q, want %q", names[i], got, "first")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := make(map[string]int, n)
	for _, name := range names {
		want[name] = 0
	}
	mqExpectListed(t, c, "any/", want)

	re := url.QueryEscape(`^any/\d+/x$`)
	if r := c.Do(http.MethodGet, "/messages?qre="+re+"&t=0", nil); r.Status != http.StatusNoContent {
		t.Fatalf("pull-any with t=0 over %d empty queues: got %v, want 204", n, r)
	}
	picks := []int{0, n - 1, n / 2}
	for range 4 {
		picks = append(picks, rand.IntN(n))
	}
	for k, i := range picks {
		type answer struct {
			r   *Response
			err error
		}
		done := make(chan answer, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r, err := c.Send(ctx, http.MethodGet, "/messages?qre="+re+"&t=90", nil)
			done <- answer{r, err}
		}()
		awaitWaitingPulls(t, c, 1)
		msg := fmt.Sprintf("pick %d", k)
		c.Push(names[i], []byte(msg), "text/plain")
		a := <-done
		if a.err != nil {
			t.Fatalf("pull-any: %v", a.err)
		}
		ExpectMessage(t, a.r, names[i], msg)
		c.ExpectReply(http.StatusNoContent, names[i], a.r.ID(), "ack")
		// The gauge must be back to none waiting before the next pick
		// waits for its own pull.
		awaitMetric(t, c, "lmq_long_polls_waiting", "pull-any answered", func(v float64) bool { return v == 0 })
	}
	mqExpectListed(t, c, "any/", want)
}

// TestManyQueuesDeleteRecreate: while pushers and pullers keep other queues
// busy, one queue is filled, deleted and re-created, again and again. The
// re-created queue starts empty and holds only what is pushed after, and
// every message of the busy queues is delivered exactly once.
func TestManyQueuesDeleteRecreate(t *testing.T) {
	heavy(t, "1000s of queues")
	t.Parallel()
	_, c := StartClient(t)
	const busy = 40
	busyName := func(i int) string { return fmt.Sprintf("busy/%d", i) }

	var stop atomic.Bool
	var pushed, pulled sync.Map // body -> true / count
	var pushes, acks atomic.Int64
	errs := make(chan error, 16)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() { // pusher
			for k := 0; !stop.Load(); k++ {
				q := busyName((w + 4*k) % busy)
				b := fmt.Sprintf("%s#%d#%d", q, w, k)
				if err := mqPush(c, q, b); err != nil {
					report(err)
					return
				}
				pushed.Store(b, true)
				pushes.Add(1)
			}
		})
		wg.Go(func() { // puller
			for k := 0; !stop.Load(); k++ {
				q := busyName((w + 4*k) % busy)
				b, err := mqPullAck(c, q, "0")
				if err != nil {
					report(err)
					return
				}
				if b == "" {
					continue
				}
				if !strings.HasPrefix(b, q+"#") {
					report(fmt.Errorf("queue %q delivered %q", q, b))
				}
				v, _ := pulled.LoadOrStore(b, new(atomic.Int64))
				v.(*atomic.Int64).Add(1)
				acks.Add(1)
			}
		})
	}

	const q = "recreated/queue"
	for round := range 5 {
		for k := range 20 {
			c.Push(q, []byte(fmt.Sprintf("old %d.%d", round, k)), "text/plain")
		}
		// A delivery in flight when the queue goes away.
		inFlight := c.MustPull(q, msgWait, fmt.Sprintf("old %d.0", round))
		c.Expect(http.StatusNoContent, http.MethodDelete, "/queues/"+Q(q), nil)
		c.Expect(http.StatusNotFound, http.MethodGet, "/queues/"+Q(q), nil)
		c.Expect(http.StatusNotFound, http.MethodDelete, "/queues/"+Q(q), nil)
		// Its id died with the queue.
		c.ExpectReply(http.StatusNotFound, q, inFlight.ID(), "ack")
		// Re-created by a pull that does not wait: empty.
		c.PullEmpty(q, "0")
		fresh := fmt.Sprintf("new %d", round)
		c.Push(q, []byte(fresh), "text/plain")
		r := c.MustPull(q, msgWait, fresh)
		c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
		c.PullEmpty(q, "0")
		if len(errs) > 0 {
			break
		}
	}
	// Let the busy load reach some volume before it stops.
	if !testwait.Until(mqDeadline, func() bool { return pushes.Load() >= 200 || len(errs) > 0 }) {
		t.Fatalf("busy queues: %d pushes in %v", pushes.Load(), mqDeadline)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	// Drain what the pullers left.
	for i := range busy {
		for {
			b, err := mqPullAck(c, busyName(i), "0")
			if err != nil {
				t.Fatal(err)
			}
			if b == "" {
				break
			}
			v, _ := pulled.LoadOrStore(b, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
		}
	}
	var missing, twice, unknown int
	pushed.Range(func(k, _ any) bool {
		v, ok := pulled.Load(k)
		switch {
		case !ok:
			missing++
		case v.(*atomic.Int64).Load() > 1:
			twice++
		}
		return true
	})
	pulled.Range(func(k, _ any) bool {
		if _, ok := pushed.Load(k); !ok {
			unknown++
		}
		return true
	})
	t.Logf("busy queues: %d pushes, %d pulled by the pullers during the deletions", pushes.Load(), acks.Load())
	if missing+twice+unknown > 0 {
		t.Errorf("busy queues: %d pushed messages never delivered, %d delivered twice, %d delivered but not pushed (of %d)", missing, twice, unknown, pushes.Load())
	}
	want := map[string]int{q: 0}
	for i := range busy {
		want[busyName(i)] = 0
	}
	mqExpectListed(t, c, "", want)
}

// TestManyQueuesCluster: three gateways on an embedded three-node cluster
// (--replicas 3) get 2,000 queues (200 under -short) of one message each;
// a node is killed (kill -9, with its gateway), and through the two others
// every acknowledged push is still there: listed, and pulled back.
func TestManyQueuesCluster(t *testing.T) {
	heavy(t, "a cluster, 1000s of queues")
	t.Parallel()
	n := mqCount(t, "LMQ_E2E_CLUSTER_QUEUES", 2000, 200)
	nodes := StartEmbeddedCluster(t, 3, "--replicas", "3")
	clients := make([]*Client, len(nodes))
	for i, g := range nodes {
		clients[i] = g.Client(t)
	}
	const prefix = "cl/"
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d/m", prefix, i)
	}
	body := func(i int) string { return "cluster message " + strconv.Itoa(i) }

	// Every queue gets one message, through the three gateways in turn. A
	// push answered other than 200 is retried: one answered 503 was not
	// stored, one answered 504 may have been, so its queue may hold it
	// twice (noted in maybeTwice).
	var maybeTwice sync.Map
	start := time.Now()
	err := concurrently(n, mqClients, func(_ context.Context, i int) error {
		var last error
		for attempt := range 10 {
			c := clients[(i+attempt)%len(clients)]
			ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
			r, err := c.Send(ctx, http.MethodPost, "/messages/"+Q(names[i]), []byte(body(i)), "Content-Type", "text/plain")
			cancel()
			switch {
			case err == nil && r.Status == http.StatusOK:
				return nil
			case err == nil && r.Status == http.StatusServiceUnavailable:
				last = fmt.Errorf("push %q: %v", names[i], r)
			default:
				maybeTwice.Store(i, true)
				last = fmt.Errorf("push %q: %v %v", names[i], r, err)
			}
			pace(200 * time.Millisecond) // back off before the retry
		}
		return last
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d R3 queues created through 3 gateways in %v", n, time.Since(start).Round(time.Millisecond))

	victim := 2
	nodes[victim].Kill()
	t.Logf("killed node %s (kill -9, with its gateway)", nodeName(victim))
	alive := clients[:victim]

	// Listed with every message, through a surviving gateway (leaders of
	// the victim's streams are elected meanwhile).
	var last, example string
	if !testwait.Until(mqDeadline, func() bool {
		got, err := mqListed(alive[0], prefix)
		if err != nil {
			last = err.Error()
			return false
		}
		bad := 0
		for i, name := range names {
			s := got[name]
			if _, twice := maybeTwice.Load(i); s != 1 && !(twice && s == 2) {
				bad++
				example = name
				last = fmt.Sprintf("%q size %d", name, s)
			}
		}
		if bad > 0 {
			last = fmt.Sprintf("%d of %d queues listed wrongly, e.g. %s", bad, n, last)
		}
		return bad == 0
	}) {
		// Listing or loss? What a pull of a wrongly listed queue finds.
		r := alive[1].Do(http.MethodGet, "/messages/"+Q(example)+"?t=5", nil)
		t.Fatalf("after the kill, GET /queues: %s; a pull of %q through the other gateway: %v", last, example, r)
	}

	// Pulled back through both survivors: all, or up to mqPullSample
	// queues spread over all (and every queue whose push was retried after
	// an ambiguous answer).
	step := mqStep(n)
	want := make(map[string]int, n)
	for i, name := range names {
		want[name] = 1
		if _, twice := maybeTwice.Load(i); twice || i%step == 0 {
			want[name] = 0
		}
	}
	err = concurrently(n, mqClients, func(_ context.Context, i int) error {
		if want[names[i]] != 0 { // read only, from here on
			return nil
		}
		c := alive[i%len(alive)]
		got, err := mqPullAck(c, names[i], msgWait)
		if err != nil {
			return err
		}
		if got != body(i) {
			return fmt.Errorf("queue %q: got %q, want %q", names[i], got, body(i))
		}
		if _, twice := maybeTwice.Load(i); twice {
			_, err = mqPullAck(c, names[i], "0")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	mqExpectListed(t, alive[1], prefix, want)
}
