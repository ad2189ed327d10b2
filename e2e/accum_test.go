package e2e

import (
	"context"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/vmihailenco/msgpack/v5"
)

// Accumulation (compound messages) over HTTP against the real binary.

// accumPush pushes and returns LMQ's accum answer ("new", "yes", "no").
func accumPush(t *testing.T, c *Client, q, body, ct string, hdr ...string) string {
	t.Helper()
	if ct != "" {
		hdr = append(hdr, "Content-Type", ct)
	}
	r := c.Do(http.MethodPost, "/messages/"+Q(q), []byte(body), hdr...)
	if r.Status != http.StatusOK {
		t.Fatalf("push %q: got %v, want 200", body, r)
	}
	return accumAnswer(t, r)
}

func accumAnswer(t *testing.T, r *Response) string {
	t.Helper()
	var st string
	if _, err := fmt.Sscanf(string(r.Body), `{"accum":%q}`, &st); err != nil {
		t.Fatalf("push answer %s", r.Body)
	}
	return st
}

// accumParts checks a compound message response and returns its parts'
// bodies (cf=multipart), in order.
func accumParts(t *testing.T, r *Response, q string) []string {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("pull %q: got %v, want a compound message", q, r)
	}
	if got := r.Header.Get(hType); got != "compound" {
		t.Fatalf("pull %q: %s %q, want compound", q, hType, got)
	}
	if got := r.Header.Get(hQueue); got != q {
		t.Errorf("pull %q: %s %q", q, hQueue, got)
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/mixed" || params["boundary"] != r.ID() {
		t.Fatalf("content-type %q, want multipart/mixed with boundary %s", r.Header.Get("Content-Type"), r.ID())
	}
	var out []string
	mr := multipart.NewReader(strings.NewReader(string(r.Body)), r.ID())
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("multipart: %v in %q", err, r.Body)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
}

// The HTTP view of a window: new/yes, nothing pullable while open, one
// compound with LMQ's exact multipart layout, cf=msgpack, bad cf.
func TestAccumHTTP(t *testing.T) {
	t.Parallel()
	_, c := StartClient(t)
	const q = "accum/http"
	c.PatchProps(q, `{"accum":0.3,"retry":3,"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["x-trace"]]]}}`)

	if st := accumPush(t, c, q, "one", "text/plain", "X-Trace", "t1"); st != "new" {
		t.Fatalf("first push: %q, want new", st)
	}
	if st := accumPush(t, c, q, "two", ""); st != "yes" {
		t.Fatalf("second push: %q, want yes", st)
	}
	c.PullEmpty(q, "0")
	r := c.Pull(q, msgWait)
	if r.Status != http.StatusOK {
		t.Fatalf("no compound message: %v", r)
	}
	id := r.ID()
	if !uuidRE.MatchString(id) || r.Header.Get(hType) != "compound" || r.Retry() != 3 {
		t.Fatalf("headers %v", r.Header)
	}
	if got := r.Header.Get("Content-Type"); got != "multipart/mixed; boundary="+id {
		t.Errorf("content-type %q", got)
	}
	want := "\r\n--" + id + "\r\ncontent-type: text/plain\r\nx-trace: t1\r\ncontent-transfer-encoding: binary\r\n\r\none" +
		"\r\n--" + id + "\r\ncontent-type: application/octet-stream\r\ncontent-transfer-encoding: binary\r\n\r\ntwo" +
		"\r\n--" + id + "--\r\n"
	if string(r.Body) != want {
		t.Errorf("body %q\nwant %q", r.Body, want)
	}
	c.ExpectReply(http.StatusNoContent, q, id, "ack")
	c.ExpectReply(http.StatusNotFound, q, id, "ack")

	if st := accumPush(t, c, q, `{"x":1}`, "application/json"); st != "new" {
		t.Fatalf("push after close: %q, want new", st)
	}
	c.Expect(http.StatusBadRequest, http.MethodGet, "/messages/"+Q(q)+"?cf=xml&t=0", nil)
	r = c.Expect(http.StatusOK, http.MethodGet, "/messages/"+Q(q)+"?cf=msgpack&t=5", nil)
	if got := r.Header.Get("Content-Type"); got != "application/x-msgpack" || r.Header.Get(hType) != "compound" {
		t.Fatalf("msgpack compound: %v", r)
	}
	var parts []struct {
		_msgpack struct{} `msgpack:",as_array"`
		Header   map[string]string
		Body     []byte
	}
	if err := msgpack.Unmarshal(r.Body, &parts); err != nil {
		t.Fatalf("msgpack body %q: %v", r.Body, err)
	}
	if len(parts) != 1 || string(parts[0].Body) != `{"x":1}` || parts[0].Header["content-type"] != "application/json" {
		t.Fatalf("msgpack parts %+v", parts)
	}
	c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	c.PullEmpty(q, "0.5")
}

// A compound message is one unit for nack, timeout and retry: it comes back
// whole under a new id with one retry less, and is dropped when they are used
// up.
func TestAccumCompoundIsOneUnit(t *testing.T) {
	t.Parallel()
	_, c := StartClient(t)
	const q = "accum/unit"
	c.PatchProps(q, `{"accum":0.2,"retry":1,"timeout":0.5}`)
	accumPush(t, c, q, "a", "")
	accumPush(t, c, q, "b", "")
	// retry fixed at the window's opening: later changes do not apply.
	c.PatchProps(q, `{"retry":5}`)

	r1 := c.Pull(q, "5")
	if got := accumParts(t, r1, q); !slices.Equal(got, []string{"a", "b"}) || r1.Retry() != 1 {
		t.Fatalf("first delivery %q, retry-remaining %d", got, r1.Retry())
	}
	c.ExpectReply(http.StatusNoContent, q, r1.ID(), "nack")
	r2 := c.Pull(q, "5")
	if got := accumParts(t, r2, q); !slices.Equal(got, []string{"a", "b"}) || r2.Retry() != 0 || r2.ID() == r1.ID() {
		t.Fatalf("after nack %q, retry-remaining %d, id %s", got, r2.Retry(), r2.ID())
	}
	c.ExpectReply(http.StatusNotFound, q, r1.ID(), "ack")
	// Let it time out: its retries are used up, so it is gone.
	awaitNoneInFlight(t, c)
	c.ExpectReply(http.StatusNotFound, q, r2.ID(), "ack")
	c.PullEmpty(q, "0.5")
}

// kill -9 with a window open, restart: the window is delivered once and
// complete, whether it was still open at the restart or closed meanwhile.
func TestAccumKillRestart(t *testing.T) {
	heavy(t, "kill and restart")
	t.Parallel()
	for _, tc := range []struct {
		name  string
		accum string
		down  time.Duration
		more  bool // the window is still open after the restart
	}{
		{"still open", "3", 0, true},
		{"closed while down", "0.3", 800 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gw := Start(t)
			c := gw.Client(t)
			const q = "accum/kill"
			c.PatchProps(q, `{"accum":`+tc.accum+`}`)
			want := []string{"a", "b"}
			if st := accumPush(t, c, q, "a", ""); st != "new" {
				t.Fatalf("first push %q", st)
			}
			accumPush(t, c, q, "b", "")
			gw.Kill()
			gw.RestartAfter(tc.down)
			if tc.more {
				if st := accumPush(t, c, q, "c", ""); st != "yes" {
					t.Fatalf("push after restart into the open window: %q, want yes", st)
				}
				want = append(want, "c")
				c.PullEmpty(q, "0")
			}
			r := c.Pull(q, "10")
			if got := accumParts(t, r, q); !slices.Equal(got, want) {
				t.Fatalf("after restart: %q, want %q", got, want)
			}
			c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
			c.PullEmpty(q, "1")
		})
	}
}

// accumLoad pushes concurrently through the clients (pushers goroutines,
// n pushes each, alternating clients) and returns the bodies pushed and how
// many pushes answered "new".
func accumLoad(t *testing.T, clients []*Client, q string, pushers, n int) (map[string]bool, int) {
	t.Helper()
	var mu sync.Mutex
	pushed := make(map[string]bool)
	news := 0
	errs := make(chan error, pushers)
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Go(func() {
			for i := range n {
				c := clients[(p+i)%len(clients)]
				body := fmt.Sprintf("p%d %03d", p, i)
				ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
				r, err := c.Send(ctx, http.MethodPost, "/messages/"+Q(q), []byte(body))
				cancel()
				if err == nil && r.Status != http.StatusOK {
					err = fmt.Errorf("status %v", r)
				}
				if err != nil {
					errs <- fmt.Errorf("push %q: %w", body, err)
					return
				}
				mu.Lock()
				pushed[body] = true
				if strings.Contains(string(r.Body), `"new"`) {
					news++
				}
				mu.Unlock()
				pace(5 * time.Millisecond) // the pushers' pace: windows must span several pushes
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

// accumDrain pulls and acks compounds through the clients until none comes
// for a while, and checks them: every pushed part exactly once, each
// pusher's parts in order, one compound per "new".
func accumDrain(t *testing.T, clients []*Client, q string, pushed map[string]bool, news int) {
	t.Helper()
	seen := make(map[string]int)
	last := make(map[string]string)
	compounds, idle := 0, 0
	for i := 0; idle < len(clients); i++ {
		c := clients[i%len(clients)]
		r := c.Pull(q, "1")
		if r.Status == http.StatusNoContent {
			idle++
			continue
		}
		idle = 0
		compounds++
		for _, b := range accumParts(t, r, q) {
			seen[b]++
			who, _, _ := strings.Cut(b, " ")
			if prev, ok := last[who]; ok && b <= prev {
				t.Errorf("%q after %q", b, prev)
			}
			last[who] = b
		}
		c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	}
	for b := range pushed {
		if seen[b] != 1 {
			t.Errorf("part %q delivered %d times", b, seen[b])
		}
	}
	if len(seen) != len(pushed) {
		t.Errorf("%d distinct parts delivered, %d pushed", len(seen), len(pushed))
	}
	if compounds != news {
		t.Errorf("%d compound messages, %d pushes answered new", compounds, news)
	}
}

// accumAwaitProps waits until a gateway sees the queue accumulate (the
// properties of another gateway arrive through NATS).
func accumAwaitProps(t *testing.T, c *Client, q string) {
	t.Helper()
	if !testwait.Until(startTimeout, func() bool { return strings.Contains(c.Props(q), `"accum":0.`) }) {
		t.Fatalf("%q does not accumulate on the second gateway", q)
	}
}

// accumTwoGateways starts two gateways on one NATS and makes q accumulate
// with props, set through the first, seen by both.
func accumTwoGateways(t *testing.T, q, props string) (g1 *Gateway, c1, c2 *Client) {
	t.Helper()
	url := StartNATS(t)
	g1 = StartWithNATS(t, url)
	c1, c2 = g1.Client(t), StartWithNATS(t, url).Client(t)
	c1.PatchProps(q, props)
	accumAwaitProps(t, c2, q)
	return g1, c1, c2
}

// Two gateways on one NATS: one compound per window, never a part twice,
// with short windows closing while pushes go through both.
func TestAccumTwoGateways(t *testing.T) {
	t.Parallel()
	const q = "accum/two"
	_, c1, c2 := accumTwoGateways(t, q, `{"accum":0.1}`)
	pushed, news := accumLoad(t, []*Client{c1, c2}, q, 4, 40)
	accumDrain(t, []*Client{c1, c2}, q, pushed, news)
}

// A gateway is killed with a window it opened: the other gateway closes it,
// once, with the parts pushed through both.
func TestAccumGatewayDies(t *testing.T) {
	heavy(t, "a gateway killed")
	t.Parallel()
	const q = "accum/dies"
	g1, c1, c2 := accumTwoGateways(t, q, `{"accum":0.5}`)
	if st := accumPush(t, c1, q, "a", ""); st != "new" {
		t.Fatalf("first push %q", st)
	}
	accumPush(t, c1, q, "b", "")
	g1.Kill()
	if st := accumPush(t, c2, q, "c", ""); st != "yes" {
		t.Fatalf("push through the other gateway: %q, want yes", st)
	}
	r := c2.Pull(q, "10")
	if got := accumParts(t, r, q); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("compound %q", got)
	}
	c2.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	c2.PullEmpty(q, "1")
}

// A three-node cluster with R3 streams: windows closing under pushes through
// all nodes, then a node killed with a window open, which the others close.
func TestAccumCluster(t *testing.T) {
	heavy(t, "a cluster")
	t.Parallel()
	gws := StartEmbeddedCluster(t, 3, "--replicas", "3")
	cs := []*Client{gws[0].Client(t), gws[1].Client(t), gws[2].Client(t)}
	const q = "accum/cluster"
	cs[0].PatchProps(q, `{"accum":0.2}`)
	accumAwaitProps(t, cs[1], q)
	accumAwaitProps(t, cs[2], q)
	pushed, news := accumLoad(t, cs, q, 3, 20)
	accumDrain(t, cs, q, pushed, news)

	if st := accumPush(t, cs[0], q, "x 000", ""); st != "new" {
		t.Fatalf("push %q, want new", st)
	}
	gws[0].Kill()
	// The node may have led the streams: the rest elect new leaders.
	var r *Response
	testwait.Paced(t, 500*time.Millisecond, time.Minute, "a push accepted after the kill", func() (bool, string) {
		r = cs[1].Do(http.MethodPost, "/messages/"+Q(q), []byte("x 001"))
		return r.Status == http.StatusOK, r.String()
	})
	want := []string{"x 000", "x 001"}
	if accumAnswer(t, r) == "new" {
		// The first window closed before the second push: two compounds.
		want = want[:1]
	}
	r = cs[1].Pull(q, "15")
	if got := accumParts(t, r, q); !slices.Equal(got, want) {
		t.Fatalf("compound %q, want %q", got, want)
	}
	cs[1].ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
}
