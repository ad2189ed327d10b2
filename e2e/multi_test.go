package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Multi-queue operations (issue 5): push to every queue matching a regexp,
// pull from any of them, over HTTP (qre) and RPC (push_all, pull_any).
// The load tests are sized for a 2-core CI machine.

// TestMultiPushAll: every existing matching queue gets the message, the
// answer maps each to its accum flag, and no queue is created.
func TestMultiPushAll(t *testing.T) {
	t.Parallel()
	gw := rpcStart(t)
	c := gw.Client(t)
	matching := []string{"pa/one", "pa/two", "pa/three/x"}
	for _, q := range append([]string{"other/pa/one"}, matching...) {
		c.PullEmpty(q, "0") // creates the queue
	}

	r := c.Expect(http.StatusOK, http.MethodPost, "/messages?qre="+url.QueryEscape("^pa/"), []byte("to all"), "Content-Type", "text/plain")
	multiExpectPushAll(t, r, matching...)
	for _, q := range matching {
		m := c.MustPull(q, "0", "to all")
		if ct := m.Header.Get("Content-Type"); ct != "text/plain" {
			t.Errorf("%s: content-type %q, want text/plain", q, ct)
		}
		c.ExpectReply(http.StatusNoContent, q, m.ID(), "ack")
	}
	c.PullEmpty("other/pa/one", "0")

	// The older path, and an RE2 class.
	r = c.Expect(http.StatusOK, http.MethodPost, "/msgs?qre="+url.QueryEscape(`^pa/t\w+$`), []byte("old path"))
	multiExpectPushAll(t, r, "pa/two")
	c.ExpectReply(http.StatusNoContent, "pa/two", c.MustPull("pa/two", "0", "old path").ID(), "ack")

	// No match: {} and no queue appears.
	r = c.Expect(http.StatusOK, http.MethodPost, "/messages?qre="+url.QueryEscape("^nomatch/q$"), []byte("x"))
	ExpectJSON(t, r, `{}`)
	if rpcQueueExists(t, c, "nomatch/q") {
		t.Error("push-all created a queue")
	}

	// Missing or invalid regexp; RE2 refuses what only PCRE knows.
	for _, path := range []string{"/messages", "/messages?qre=" + url.QueryEscape("("), "/msgs?qre=" + url.QueryEscape("["),
		"/messages?qre=" + url.QueryEscape("(?=pa)"), "/messages?qre=" + url.QueryEscape(`(a)\1`)} {
		c.Expect(http.StatusBadRequest, http.MethodPost, path, []byte("x"))
	}
	for _, q := range matching {
		c.PullEmpty(q, "0") // the refused pushes left nothing
	}

	t.Run("rpc", func(t *testing.T) {
		rc := dialRPC(t, gw.RPCAddr)
		rc.MustOK("push_all", "^pa/t", "rpc to all")
		for _, q := range []string{"pa/two", "pa/three/x"} {
			m := rc.MustPull("pull", q, 0)
			if m.Content != "rpc to all" {
				t.Fatalf("%s: %+v", q, m)
			}
			rc.MustOK("done", q, m.ID)
		}
		rc.MustEmpty("pull", "pa/one", 0)
		rc.MustOK("push_all", "^nomatch/q$", "x") // LMQ answered ok here too
		if rpcQueueExists(t, gw.Client(t), "nomatch/q") {
			t.Error("push_all created a queue")
		}
		rc.MustFail("push_all", "(", "x")
		rc.MustFail("push_all", "(?=pa)", "x")
	})
}

// TestMultiPullAny: the first available message of any matching queue, with
// the t rules of a single pull, including queues created while it waits.
func TestMultiPullAny(t *testing.T) {
	t.Parallel()
	gw := rpcStart(t)
	c := gw.Client(t)
	for _, q := range []string{"any/1", "any/2", "any/3"} {
		c.PullEmpty(q, "0")
	}
	pathAny := func(re, wait string) string {
		p := "/messages?qre=" + url.QueryEscape(re)
		if wait != "" {
			p += "&t=" + wait
		}
		return p
	}

	// t=0 does not wait, also when no queue matches at all.
	for _, re := range []string{"^any/", "^nothing-here/"} {
		// (A wait would be forever, beyond the client's timeout.)
		c.Expect(http.StatusNoContent, http.MethodGet, pathAny(re, "0"), nil)
	}
	r := c.Expect(http.StatusNoContent, http.MethodGet, pathAny("^any/", "0.3"), nil)
	if r.Elapsed < 300*time.Millisecond {
		t.Errorf("pull-any t=0.3 answered 204 after %v", r.Elapsed)
	}

	// The message comes from the queue that has one, and says so.
	c.Push("any/2", []byte("in two"), "text/plain")
	r = c.Expect(http.StatusOK, http.MethodGet, pathAny("^any/", "0"), nil)
	ExpectMessage(t, r, "any/2", "in two")
	c.ExpectReply(http.StatusNoContent, "any/2", r.ID(), "ack")
	c.Push("any/3", []byte("old path"), "")
	r = c.Expect(http.StatusOK, http.MethodGet, "/msgs?qre="+url.QueryEscape("^any/")+"&t=1", nil)
	ExpectMessage(t, r, "any/3", "old path")
	c.ExpectReply(http.StatusNoContent, "any/3", r.ID(), "ack")

	// Bad parameters.
	for _, p := range []string{"/messages?t=0", pathAny("(", "0"), pathAny("(?=any)", "0"), pathAny("^any/", "soon"), pathAny("^any/", "0") + "&cf=xml"} {
		c.Expect(http.StatusBadRequest, http.MethodGet, p, nil)
	}

	t.Run("t absent waits", func(t *testing.T) {
		c := gw.Client(t)
		w := multiGo(c, http.MethodGet, pathAny("^any/", ""))
		w.expectPending(t, 500*time.Millisecond)
		c.Push("any/1", []byte("wake"), "")
		r := w.result(t, 10*time.Second)
		ExpectMessage(t, r, "any/1", "wake")
		c.ExpectReply(http.StatusNoContent, "any/1", r.ID(), "ack")
	})

	t.Run("queue created while waiting", func(t *testing.T) {
		c := gw.Client(t)
		w := multiGo(c, http.MethodGet, pathAny("^late/", "20"))
		w.expectPending(t, 300*time.Millisecond)
		c.PullEmpty("late/empty", "0") // a matching queue appears, still empty
		w.expectPending(t, 300*time.Millisecond)
		c.Push("late/new", []byte("new queue"), "") // created by this push
		r := w.result(t, 10*time.Second)
		ExpectMessage(t, r, "late/new", "new queue")
		c.ExpectReply(http.StatusNoContent, "late/new", r.ID(), "ack")
	})
}

// TestMultiNoneInvisible: a pull-any registered on many queues must not keep
// messages of the queues it was not answered from, whether it is answered
// from one of them or its client goes away. Queue timeouts are 30 s, so a
// message wrongly held would be missing for the rest of the test.
func TestMultiNoneInvisible(t *testing.T) {
	t.Parallel()
	gw := rpcStart(t)
	c := gw.Client(t)
	queues := []string{"inv/1", "inv/2", "inv/3", "inv/4", "inv/5"}
	for _, q := range queues {
		c.PatchProps(q, `{"timeout":30}`)
	}
	pathAny := "/messages?qre=" + url.QueryEscape("^inv/")

	t.Run("answered from one", func(t *testing.T) {
		c := gw.Client(t)
		waiting := make([]*multiAsync, 3)
		for i := range waiting {
			waiting[i] = multiGo(c, http.MethodGet, pathAny)
		}
		for _, w := range waiting {
			w.expectPending(t, 300*time.Millisecond)
		}
		r := c.Expect(http.StatusOK, http.MethodPost, pathAny, []byte("one each"))
		multiExpectPushAll(t, r, queues...)
		var got []*Response
		for _, w := range waiting {
			got = append(got, w.result(t, 10*time.Second))
		}
		// The other two at once, without waiting for anything.
		for range len(queues) - len(waiting) {
			got = append(got, c.Do(http.MethodGet, pathAny+"&t=0", nil))
		}
		multiExpectOnePerQueue(t, c, got, queues, "one each")
		c.Expect(http.StatusNoContent, http.MethodGet, pathAny+"&t=0", nil)
	})

	t.Run("client goes away", func(t *testing.T) {
		c := gw.Client(t)
		ctx, cancel := context.WithCancel(context.Background())
		w := multiGoCtx(ctx, c, http.MethodGet, pathAny)
		w.expectPending(t, 300*time.Millisecond)
		cancel()
		if _, err := w.wait(10 * time.Second); err == nil {
			t.Fatal("a cancelled pull-any got an answer")
		}
		// Let the gateway see the connection close; a push racing the close
		// itself is TestRPCDisconnectRace's subject.
		awaitMetric(t, c, "lmq_long_polls_waiting", "pull-any given up", func(v float64) bool { return v == 0 })
		for _, q := range queues {
			c.Push(q, []byte("after cancel"), "")
		}
		var got []*Response
		for range queues {
			got = append(got, c.Do(http.MethodGet, pathAny+"&t=0", nil))
		}
		multiExpectOnePerQueue(t, c, got, queues, "after cancel")
		c.Expect(http.StatusNoContent, http.MethodGet, pathAny+"&t=0", nil)
	})

	t.Run("rpc client goes away", func(t *testing.T) {
		rc := dialRPC(t, gw.RPCAddr)
		a := dialRPC(t, gw.RPCAddr)
		_, ch, err := a.Send("pull_any", "^inv/")
		if err != nil {
			t.Fatal(err)
		}
		awaitWaitingPulls(t, gw.Client(t), 1)
		// Half-close and read the gateway's "empty": it has seen the client go.
		if err := a.nc.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if r, err := a.Await(ctx, ch); err != nil || r.Result != "empty" {
			t.Fatalf("pull_any of a departing client: %s %v", rpcShort(r.Result), err)
		}
		a.Close()
		rc.MustOK("push_all", "^inv/", "rpc after close")
		seen := map[string]bool{}
		for range queues {
			m := rc.MustPull("pull_any", "^inv/", 0)
			if m.Content != "rpc after close" || seen[m.Queue] || m.Retry != 2 {
				t.Fatalf("pull_any got %+v (seen %v)", m, seen)
			}
			seen[m.Queue] = true
			rc.MustOK("done", m.Queue, m.ID)
		}
		rc.MustEmpty("pull_any", "^inv/", 0)
	})
}

// TestMultiFairness: with three busy queues, pull-any consumers serve each a
// reasonable share from the start, not one queue after the other.
func TestMultiFairness(t *testing.T) {
	t.Parallel()
	// Under -short, 200 per queue still tell a fair share (100 of the first
	// 300 pulls each) from one queue served after another (200, 100, 0).
	perQueue := 1000
	if testing.Short() {
		perQueue = 200
	}
	queues := []string{"fair/a", "fair/b", "fair/c"}
	gw := rpcStart(t)
	c := gw.Client(t)
	for _, q := range queues {
		c.PatchProps(q, `{"timeout":300}`) // nothing times out during the test
	}
	start := time.Now()
	err := concurrently(len(queues)*perQueue, 8, func(ctx context.Context, i int) error {
		q := queues[i%len(queues)]
		return c.TryPush(ctx, q, []byte(fmt.Sprintf("%s-%d", q, i)))
	})
	if err != nil {
		t.Fatal(err)
	}
	pushed := time.Since(start)

	// The first half of the messages, by 4 concurrent consumers.
	half := len(queues) * perQueue / 2
	var mu sync.Mutex
	counts := map[string]int{}
	err = concurrently(half, 4, func(ctx context.Context, i int) error {
		r, err := c.Send(ctx, http.MethodGet, "/messages?qre="+url.QueryEscape("^fair/")+"&t=5", nil)
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK {
			return fmt.Errorf("pull-any %d: %v", i, r)
		}
		q := r.Header.Get(hQueue)
		if !strings.HasPrefix(string(r.Body), q+"-") {
			return fmt.Errorf("body %q from queue %q", r.Body, q)
		}
		mu.Lock()
		counts[q]++
		mu.Unlock()
		ack, err := c.Send(ctx, http.MethodPost, "/messages/"+Q(q)+"/"+url.PathEscape(r.ID())+"?reply=ack", nil)
		if err == nil && ack.Status != http.StatusNoContent {
			err = fmt.Errorf("ack: %v", ack)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pushes in %v; first %d pull-any+ack in %v: %v", len(queues)*perQueue, pushed, half, time.Since(start)-pushed, counts)
	// A fair share is a third (500; 100 under -short); a queue served only
	// after another ran dry would get 0 here. Require at least 20% each.
	for _, q := range queues {
		if counts[q] < half/5 {
			t.Errorf("queue %s got %d of the first %d pulls (%v), want at least %d", q, counts[q], half, counts, half/5)
		}
	}
}

// TestMultiExactlyOnce: 20 concurrent pull-any clients over 10 queues of 500
// messages each (100 under -short), pushed while they pull; with every delivery acked, each
// message arrives exactly once. The run takes what the machine makes it
// take: it is cut only when nothing was pushed or received for loadStall.
func TestMultiExactlyOnce(t *testing.T) {
	t.Parallel()
	const nQueues, clients = 10, 20
	// Under -short a fifth of the messages: the 20 clients still race for
	// every queue while it is pushed to, which is what could duplicate or
	// lose one; the full count only runs that race longer.
	perQueue := 500
	if testing.Short() {
		perQueue = 100
	}
	total := nQueues * perQueue
	gw := rpcStart(t)
	c := gw.Client(t)
	queues := make([]string, nQueues)
	for i := range queues {
		queues[i] = fmt.Sprintf("once/%02d", i)
		c.PatchProps(queues[i], `{"timeout":300}`) // no redelivery by timeout
	}
	pathAny := "/messages?qre=" + url.QueryEscape("^once/") + "&t=1"

	var (
		mu       sync.Mutex
		seen     = make(map[string]int, total)
		problems []string
		received atomic.Int64
		pushed   atomic.Int64
		allIn    = make(chan struct{})
	)
	ctx, cancel := untilStalled(context.Background(), loadStall, "messages pushed and received", func() int64 {
		return pushed.Load() + received.Load()
	})
	defer cancel()
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				select {
				case <-allIn:
					return
				default:
				}
				r, err := c.Send(ctx, http.MethodGet, pathAny, nil)
				if err != nil {
					if ctx.Err() == nil {
						problem("pull-any: %v", err)
					}
					return
				}
				if r.Status == http.StatusNoContent {
					continue
				}
				if r.Status != http.StatusOK {
					problem("pull-any: %v", r)
					return
				}
				q, body := r.Header.Get(hQueue), string(r.Body)
				if !strings.HasPrefix(body, q+":") {
					problem("body %q from queue %q", body, q)
				}
				ack, err := c.Send(ctx, http.MethodPost, "/messages/"+Q(q)+"/"+url.PathEscape(r.ID())+"?reply=ack", nil)
				if err != nil || ack.Status != http.StatusNoContent {
					problem("ack %s of %s: %v %v", r.ID(), body, ack, err)
				}
				mu.Lock()
				seen[body]++
				mu.Unlock()
				if received.Add(1) == int64(total) {
					close(allIn)
				}
			}
		})
	}
	// One pusher per queue, while the clients pull.
	pushErr := concurrently(total, nQueues, func(ctx context.Context, i int) error {
		q := queues[i%nQueues]
		err := c.TryPush(ctx, q, []byte(fmt.Sprintf("%s:%d", q, i/nQueues)))
		if err == nil {
			pushed.Add(1)
		}
		return err
	})
	if pushErr != nil {
		cancel()
		wg.Wait()
		t.Fatal(pushErr)
	}
	select {
	case <-allIn:
	case <-ctx.Done():
	}
	wg.Wait()
	t.Logf("%d messages pushed and pulled by %d pull-any clients in %v", total, clients, time.Since(start))
	if err := context.Cause(ctx); errors.Is(err, errStalled) {
		t.Errorf("the run stopped: %v", err)
	}

	for _, p := range problems {
		t.Error(p)
	}
	dups := 0
	for body, n := range seen {
		if n > 1 {
			dups++
			if dups <= 10 {
				t.Errorf("%s delivered %d times", body, n)
			}
		}
	}
	if len(seen) != total || dups > 0 {
		t.Fatalf("%d distinct messages of %d, %d delivered more than once", len(seen), total, dups)
	}
	c.Expect(http.StatusNoContent, http.MethodGet, "/messages?qre="+url.QueryEscape("^once/")+"&t=0", nil)
}

// TestMultiRPC: pull_any over RPC, with the t rules, a queue created while
// it waits, and a smaller exactly-once run over several connections.
func TestMultiRPC(t *testing.T) {
	t.Parallel()
	gw, c := rpcStartDialed(t)
	for _, q := range []string{"rany/1", "rany/2"} {
		c.MustEmpty("pull", q, 0)
	}
	// (A wait would be forever, beyond the client's timeout.)
	c.MustEmpty("pull_any", "^rany/", 0)
	c.MustEmpty("pull_any", "^nothing-here/", 0)
	start := time.Now()
	c.MustEmpty("pull_any", "^rany/", 0.3)
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Errorf("pull_any with timeout 0.3 answered empty after %v", el)
	}
	c.MustFail("pull_any", "(")
	c.MustFail("pull_any", 5)

	c.MustOK("push", "rany/2", "two")
	m := c.MustPull("pull_any", "^rany/", 0)
	if m.Queue != "rany/2" || m.Content != "two" || m.Retry != 2 {
		t.Fatalf("pull_any: %+v", m)
	}
	c.MustOK("done", m.Queue, m.ID)

	// Waiting without a timeout, then a queue is created by a push.
	_, ch, err := c.Send("pull_any", "^rlate/")
	if err != nil {
		t.Fatal(err)
	}
	awaitWaitingPulls(t, gw.Client(t), 1)
	c.MustOK("push", "rlate/new", "late") // same connection: not held up by the pull
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.Await(ctx, ch)
	if err != nil {
		t.Fatalf("waiting pull_any: %v", err)
	}
	if m, err = rpcPulled(r.Result); err != nil || m.Queue != "rlate/new" || m.Content != "late" {
		t.Fatalf("waiting pull_any: %+v %v", m, err)
	}
	c.MustOK("done", m.Queue, m.ID)

	t.Run("exactly once", func(t *testing.T) {
		const nQueues, perQueue, consumers = 4, 100, 4
		const total = nQueues * perQueue
		c := c.For(t)
		var calls []rpcCall
		for i := range total {
			q := fmt.Sprintf("ronce/%d", i%nQueues)
			calls = append(calls, rpcCall{"push", []any{q, fmt.Sprintf("%s:%d", q, i)}})
		}
		for i := range nQueues {
			c.MustEmpty("pull", fmt.Sprintf("ronce/%d", i), 0)
		}
		var (
			mu       sync.Mutex
			seen     = map[string]int{}
			problems []string
			received atomic.Int64
		)
		// Cut only when nothing was received for loadStall: the pushes are
		// sent at once, the pulls' pace is the machine's.
		ctx, cancel := untilStalled(context.Background(), loadStall, "messages received", received.Load)
		defer cancel()
		var wg sync.WaitGroup
		for range consumers {
			rc := dialRPC(t, gw.RPCAddr)
			wg.Go(func() {
				for ctx.Err() == nil && received.Load() < total {
					r, err := rc.Call(ctx, "pull_any", "^ronce/", 0.5)
					if err != nil || r.Err != nil {
						if ctx.Err() == nil {
							mu.Lock()
							problems = append(problems, fmt.Sprintf("pull_any: %v %q", err, r.ErrString()))
							mu.Unlock()
						}
						return
					}
					if r.Result == "empty" {
						continue
					}
					m, err := rpcPulled(r.Result)
					if err == nil {
						var d rpcResponse
						if d, err = rc.Call(ctx, "done", m.Queue, m.ID); err == nil && d.Result != "ok" {
							err = fmt.Errorf("done: %q", d.ErrString())
						}
					}
					body, _ := m.Content.(string)
					mu.Lock()
					if err != nil {
						problems = append(problems, err.Error())
					}
					seen[body]++
					mu.Unlock()
					received.Add(1)
				}
			})
		}
		chans, err := c.SendBatch(calls)
		if err != nil {
			t.Fatal(err)
		}
		rpcAwaitAll(t, c, chans, func(i int, r rpcResponse) {
			if r.Result != "ok" {
				t.Errorf("push %d: %s %q", i, rpcShort(r.Result), r.ErrString())
			}
		})
		wg.Wait()
		if err := context.Cause(ctx); errors.Is(err, errStalled) {
			t.Errorf("the consumers stopped: %v", err)
		}
		for _, p := range problems {
			t.Error(p)
		}
		for body, n := range seen {
			if n != 1 {
				t.Errorf("%q delivered %d times", body, n)
			}
		}
		if len(seen) != total {
			t.Fatalf("%d distinct messages of %d", len(seen), total)
		}
		c.MustEmpty("pull_any", "^ronce/", 0)
	})
}

// ---- helpers ----

// multiExpectPushAll checks a push-all answer: exactly the given queues,
// each {"accum":"no"}.
func multiExpectPushAll(t testing.TB, r *Response, queues ...string) {
	t.Helper()
	expectJSONType(t, r)
	var got map[string]map[string]string
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatalf("push-all answer %s: %v", r.Body, err)
	}
	want := make(map[string]map[string]string, len(queues))
	for _, q := range queues {
		want[q] = map[string]string{"accum": "no"}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("push-all answer %s, want %v", r.Body, want)
	}
}

// multiExpectOnePerQueue checks that the responses are one message with
// body from each queue (first delivery), and acks them.
func multiExpectOnePerQueue(t testing.TB, c *Client, got []*Response, queues []string, body string) {
	t.Helper()
	var from []string
	for _, r := range got {
		if r.Status != http.StatusOK {
			t.Fatalf("pull-any: %v (so far from %v)", r, from)
		}
		q := r.Header.Get(hQueue)
		ExpectMessage(t, r, q, body)
		if r.Retry() != 2 {
			t.Errorf("message of %s: retry-remaining %d, want 2 (first delivery)", q, r.Retry())
		}
		from = append(from, q)
		c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	}
	sort.Strings(from)
	want := append([]string(nil), queues...)
	sort.Strings(want)
	if !reflect.DeepEqual(from, want) {
		t.Fatalf("messages came from %v, want one from each of %v", from, want)
	}
}

// multiAsync is a request running in the background.
type multiAsync struct {
	done chan struct{}
	r    *Response
	err  error
}

// multiGo starts a request bounded by requestTimeout.
func multiGo(c *Client, method, path string) *multiAsync {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	a := multiGoCtx(ctx, c, method, path)
	go func() {
		<-a.done
		cancel()
	}()
	return a
}

// multiGoCtx starts a request bounded by ctx.
func multiGoCtx(ctx context.Context, c *Client, method, path string) *multiAsync {
	a := &multiAsync{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.r, a.err = c.Send(ctx, method, path, nil)
	}()
	return a
}

// wait waits up to d for the request to end.
func (a *multiAsync) wait(d time.Duration) (*Response, error) {
	select {
	case <-a.done:
		return a.r, a.err
	case <-time.After(d):
		return nil, fmt.Errorf("no answer within %v", d)
	}
}

// result waits up to d and fails the test unless the request got a response.
func (a *multiAsync) result(t testing.TB, d time.Duration) *Response {
	t.Helper()
	r, err := a.wait(d)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// expectPending waits d and fails if the request ended meanwhile: it is
// meant to be waiting in the gateway.
func (a *multiAsync) expectPending(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case <-a.done:
		t.Fatalf("request answered while it should wait: %v %v", a.r, a.err)
	case <-time.After(d):
	}
}
