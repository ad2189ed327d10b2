package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// TestKillMixedLoad is issue 25's first finding: kill -9 of the gateway under
// a mixed load (priorities 0–9, delays of 1–3 s, batches, an accumulating
// queue; consumers pulling with t=1 and acking), a restart on the same data,
// then every message that was answered 200 and never acked must be delivered
// again, whatever its priority, delay or batch. Before the fix, delayed
// messages of priority ≥ 1 that came due after the restart were never
// handed out: the gateway only looked at a queue's priority levels once it
// had seen a priority since its start.
//
// LMQ_CRASH_ROUNDS sets the number of kill/restart rounds (default 2) and
// LMQ_CRASH_PUSHES the pushes answered before each kill (default 1,500); the
// closing note of issue 25 ran it with more of both.
func TestKillMixedLoad(t *testing.T) {
	heavy(t, "a kill loop")
	t.Parallel()
	rounds := 2
	if v, err := strconv.Atoi(os.Getenv("LMQ_CRASH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	pushes := 1500
	if v, err := strconv.Atoi(os.Getenv("LMQ_CRASH_PUSHES")); err == nil && v > 0 {
		pushes = v
	}
	gw, c := StartClient(t)
	const q, qa = "mx", "mx-accum"
	c.PatchProps(q, `{"timeout":2,"retry":100}`)
	c.PatchProps(qa, `{"accum":0.3,"timeout":2,"retry":100}`)
	for round := range rounds {
		led := newLedger()
		crashLoad(t, gw, led, round, pushes, q, qa) // ends with the kill
		gw.Restart()
		stuck := crashDrain(t, gw, led, q, qa)
		t.Logf("round %d: %d messages answered 200, %d acked before the kill (%d acks cut by it), %d to deliver after the restart, %d not delivered",
			round, led.pushed, led.ackedBefore, len(led.sent), led.owedAtRestart, stuck)
	}
}

// ledger accounts for every message of a crash round. owed: answered 200
// and not acked (must come after the restart); done: acked with 204 (must
// never come again). A message whose ack was sent but not answered before
// the kill is neither: the ack may have taken effect without its answer
// getting out. (A push's answer may come after its message was pulled.)
type ledger struct {
	mu                                 sync.Mutex
	owed, done, sent                   map[string]bool
	pushed, ackedBefore, owedAtRestart int
	killing                            atomic.Bool // no ack is sent once set
}

func newLedger() *ledger {
	return &ledger{owed: make(map[string]bool), done: make(map[string]bool), sent: make(map[string]bool)}
}

func (l *ledger) stored(bodies ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range bodies {
		if !l.done[b] && !l.sent[b] {
			l.owed[b] = true
		}
		l.pushed++
	}
}

// acking notes an ack about to be sent: until its answer, the messages are
// not owed.
func (l *ledger) acking(bodies ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range bodies {
		delete(l.owed, b)
		l.sent[b] = true
	}
}

// acked notes an ack answered 204.
func (l *ledger) acked(bodies ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range bodies {
		delete(l.sent, b)
		l.done[b] = true
		l.ackedBefore++
	}
}

// crashLoad runs 8 producers and 8 consumers (plus one on the accumulating
// queue) against gw for a while, recording what was answered, and returns
// with them still running until the kill: the kill comes in the middle of
// their requests.
func crashLoad(t *testing.T, gw *Gateway, led *ledger, round, pushes int, q, qa string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := gw.Client(t)
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Go(func() { crashProducer(ctx, c, led, fmt.Sprintf("r%d-p%d", round, p), q, qa) })
	}
	for range 8 {
		wg.Go(func() { crashConsumer(ctx, c, led, q) })
	}
	wg.Go(func() { crashConsumer(ctx, c, led, qa) })
	// Until enough was pushed and consumed that the kill finds messages
	// of every kind waiting, delayed and in flight.
	testwait.Within(t, 5*time.Minute, "the load's pushes and acks", func() bool {
		led.mu.Lock()
		defer led.mu.Unlock()
		return led.pushed >= pushes && led.ackedBefore >= pushes/5
	})
	// The kill lands while every worker is mid-request; they stop at their
	// first failed request.
	led.killing.Store(true)
	gw.Kill()
	cancel()
	wg.Wait()
}

// crashProducer pushes one kind of message after another until a push fails.
func crashProducer(ctx context.Context, c *Client, led *ledger, who, q, qa string) {
	rng := rand.New(rand.NewPCG(uint64(len(who)), uint64(time.Now().UnixNano())))
	for i := 0; ctx.Err() == nil; i++ {
		body := fmt.Sprintf("%s-%d", who, i)
		var (
			path   string
			data   []byte
			hdr    []string
			bodies = []string{body}
		)
		switch i % 6 {
		case 0, 1: // a priority
			path = fmt.Sprintf("/messages/%s?priority=%d", Q(q), rng.IntN(10))
			data = []byte(body)
		case 2: // a delay, with a priority
			path = fmt.Sprintf("/messages/%s?delay=%d&priority=%d", Q(q), 1+rng.IntN(3), rng.IntN(10))
			data = []byte(body)
		case 3: // a batch of three
			bodies = []string{body + "a", body + "b", body + "c"}
			var ct string
			data, ct = multipartBatch(bodies)
			path = "/messages/" + Q(q) + "?batch=1"
			hdr = []string{"Content-Type", ct}
		case 4: // an accumulating queue
			path = "/messages/" + Q(qa)
			data = []byte(body)
		default: // plain
			path = "/messages/" + Q(q)
			data = []byte(body)
		}
		r, err := c.Send(ctx, http.MethodPost, path, data, hdr...)
		if err != nil {
			return
		}
		if r.Status == http.StatusOK {
			led.stored(bodies...)
		}
	}
}

// crashConsumer pulls with t=1 and acks until a request fails.
func crashConsumer(ctx context.Context, c *Client, led *ledger, q string) {
	for ctx.Err() == nil {
		r, err := c.Send(ctx, http.MethodGet, "/messages/"+Q(q)+"?t=1", nil)
		if err != nil {
			return
		}
		if r.Status != http.StatusOK {
			continue
		}
		bodies, err := deliveredBodies(r)
		if err != nil || led.killing.Load() {
			return // not acked: owed after the restart
		}
		led.acking(bodies...)
		a, err := c.Send(ctx, http.MethodPost, "/messages/"+Q(q)+"/"+r.ID()+"?reply=ack", nil)
		if err != nil {
			return
		}
		if a.Status == http.StatusNoContent {
			led.acked(bodies...)
		}
	}
}

// crashDrain pulls and acks after the restart until every owed message came,
// and returns how many did not within the bound: their delay (≤ 3 s), the
// queue's timeout (2 s) plus the consumer's backstop (5 s), and a wide
// margin for a loaded machine.
func crashDrain(t *testing.T, gw *Gateway, led *ledger, q, qa string) int {
	t.Helper()
	c := gw.Client(t)
	led.mu.Lock()
	led.owedAtRestart = len(led.owed)
	led.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	remaining := func() int {
		led.mu.Lock()
		defer led.mu.Unlock()
		return len(led.owed)
	}
	for i := range 5 {
		name := q
		if i == 4 {
			name = qa
		}
		wg.Go(func() {
			for ctx.Err() == nil && remaining() > 0 {
				r, err := c.Send(ctx, http.MethodGet, "/messages/"+Q(name)+"?t=1", nil)
				if err != nil || r.Status != http.StatusOK {
					continue
				}
				bodies, err := deliveredBodies(r)
				if err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
					continue
				}
				led.mu.Lock()
				for _, b := range bodies {
					if led.done[b] {
						mu.Lock()
						errs = append(errs, fmt.Sprintf("%q delivered again after its ack was answered 204", b))
						mu.Unlock()
					}
				}
				led.mu.Unlock()
				a, err := c.Send(ctx, http.MethodPost, "/messages/"+Q(name)+"/"+r.ID()+"?reply=ack", nil)
				if err == nil && a.Status == http.StatusNoContent {
					led.mu.Lock()
					for _, b := range bodies {
						delete(led.owed, b)
						led.done[b] = true
					}
					led.mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	if n := len(led.owed); n > 0 {
		var some []string
		for b := range led.owed {
			if len(some) < 20 {
				some = append(some, b)
			}
		}
		st := c.Do(http.MethodGet, "/queues/"+Q(q), nil)
		t.Errorf("%d of %d messages answered 200 and never acked were not delivered after the restart, e.g. %q; GET /queues/%s: %s",
			n, led.owedAtRestart, some, q, st.Body)
	}
	return len(led.owed)
}

// deliveredBodies are the message bodies of one delivery: the body, or the
// parts of a compound message.
func deliveredBodies(r *Response) ([]string, error) {
	if r.Header.Get(hType) != "compound" {
		return []string{string(r.Body)}, nil
	}
	mr := multipart.NewReader(bytes.NewReader(r.Body), r.ID())
	var out []string
	for {
		p, err := mr.NextPart()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("compound message: %w", err)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("compound part: %w", err)
		}
		out = append(out, string(b))
	}
}

// multipartBatch is a ?batch=1 body of one text/plain part per body.
func multipartBatch(bodies []string) ([]byte, string) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, b := range bodies {
		part, _ := w.CreatePart(textproto.MIMEHeader{"Content-Type": {"text/plain"}})
		_, _ = part.Write([]byte(b))
	}
	_ = w.Close()
	return buf.Bytes(), "multipart/mixed; boundary=" + w.Boundary()
}
