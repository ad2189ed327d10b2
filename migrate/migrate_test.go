package migrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/httpapi"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testcore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/internal/route"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// node is an in-process gateway core on its own embedded NATS.
type node struct {
	nc   *nats.Conn
	core *gateway.Gateway
}

func startNode(t *testing.T) *node {
	t.Helper()
	ns := testnats.Start(t)
	nc := testnats.Connect(t, ns, "test")
	n := &node{nc: nc}
	n.core = newCore(t, nc)
	return n
}

// js is a JetStream handle on the node's NATS, to look behind the core.
func (n *node) js(t *testing.T) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(n.nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func newCore(t *testing.T, nc *nats.Conn) *gateway.Gateway {
	return testcore.New(t, nc, gateway.Config{})
}

// serveLMQ serves the LMQ HTTP API of core on addr, with a minimal /stats
// (queue sizes only) standing in for the real one.
func serveLMQ(t *testing.T, core *gateway.Gateway, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	h := httpapi.New(httpapi.CoreOf(core), httpapi.Options{Mount: func(t *route.Table) {
		t.HandleFunc("/stats", route.Authenticated, func(w http.ResponseWriter, r *http.Request) {
			qs := map[string]any{}
			for _, name := range core.Queues().QueueNames() {
				if qi, err := core.Inspect().Queue(r.Context(), name); err == nil {
					qs[name] = map[string]any{"size": qi.Size}
				}
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"queues": qs})
		}, http.MethodGet)
	}})
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// drain pulls and acks everything in queue, returning bodies in order.
func drain(t *testing.T, core *gateway.Gateway, queue string) (normal []gateway.Message, compound [][]gateway.Message) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	for {
		d, err := core.Messages().Pull(ctx, queue, 0)
		if err != nil {
			t.Fatal(err)
		}
		if d == nil {
			return normal, compound
		}
		if d.Compound {
			compound = append(compound, d.Parts)
		} else {
			normal = append(normal, d.Message)
		}
		if err := core.Messages().Reply(ctx, queue, d.ID, gateway.Ack); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMigrateInProcess migrates between two in-process cores: a dry run, a
// run cancelled in the middle, and one that finishes; compound messages,
// kept headers, a timeout-0 queue, the --queues filter, own properties only
// where they differ from the copied default list.
func TestMigrateInProcess(t *testing.T) {
	src, dst := startNode(t), startNode(t)
	ctx := ctxT(t, 90*time.Second)
	addr := freeAddr(t)
	serveLMQ(t, src.core, addr)

	defaults, _ := mapping.ParseDefaultList([]byte(`[["^q",{"retry":4,"timeout":2}]]`))
	if err := src.core.Queues().SetDefaultProps(ctx, defaults); err != nil {
		t.Fatal(err)
	}
	timeout := 0.0
	retry := 1
	hooks := mapping.Hooks{mapping.HookPointPreHTTPPush: {{Name: mapping.HookPreserveHeader, Args: []string{"x-trace"}}}}
	if err := src.core.Queues().UpdateProps(ctx, "q/zero", mapping.Props{Timeout: &timeout, Retry: &retry, Hooks: hooks}); err != nil {
		t.Fatal(err)
	}
	if err := src.core.Queues().UpdateProps(ctx, "empty", mapping.Props{Retry: &retry}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	push := func(q string, n int) {
		for i := range n {
			body := fmt.Sprintf("%s#%03d", q, i)
			msg := gateway.Message{ContentType: "text/plain", Body: []byte(body)}
			if q == "q/zero" {
				msg.Kept = []gateway.Header{{Name: "x-trace", Value: body}}
			}
			if _, err := src.core.Messages().Push(ctx, q, msg); err != nil {
				t.Fatal(err)
			}
			want[q] = append(want[q], body)
		}
	}
	push("q a+b", 150)
	push("q/zero", 30)
	push("other", 20)
	parts := []gateway.Message{{ContentType: "text/plain", Body: []byte("p1")}, {Body: []byte("p2"), Kept: []gateway.Header{{Name: "user-agent", Value: "x"}}}}
	if _, err := src.core.Logs().StoreCopy(ctx, "q a+b", gateway.Copy{Parts: parts, Retry: 2, Create: true}); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	opts := Options{
		From: "http://" + addr, NATS: dst.nc, Queues: regexp.MustCompile(`^(q|empty)`),
		Linger: 2 * time.Second, RetryFor: 20 * time.Second, MinSourceTimeout: 3 * time.Second,
		Progress: 200 * time.Millisecond, Parallel: 2,
	}

	// Dry run: nothing moves.
	dry := opts
	dry.DryRun = true
	rep, err := Migrate(ctx, dry, &out)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Messages != 181 || len(rep.Queues) != 3 {
		t.Fatalf("dry run: %+v\n%s", rep, out.String())
	}
	if names := dst.core.Queues().QueueNames(); len(names) != 0 {
		t.Fatalf("dry run created %v", names)
	}

	// Run 1, cancelled after some messages.
	c1, cancel1 := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		testwait.Until(testwait.Bound, func() bool {
			qi, err := dst.core.Inspect().Queue(c1, "q a+b")
			return c1.Err() != nil || (err == nil && qi.Size >= 40)
		})
		cancel1()
	})
	rep1, err := Migrate(c1, opts, &out)
	cancel1()
	wg.Wait()
	if err == nil || rep1 == nil {
		t.Fatalf("run 1 was not interrupted: %v\n%s", err, out.String())
	}

	// Run 2 finishes. (A source killed under a running migration is
	// e2e.TestMigrate's part.)
	rep2, err := Migrate(ctx, opts, &out)
	if err != nil {
		t.Fatalf("run 2: %v\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())

	var dups, unconfirmed int64
	for _, r := range []*Report{rep1, rep2} {
		if r != nil {
			dups += r.Duplicates
			unconfirmed += r.Unconfirmed
		}
	}
	extras := int64(0)
	for _, q := range []string{"q a+b", "q/zero", "empty"} {
		s, _ := src.core.Queues().QueueProps(ctx, q)
		d, _ := dst.core.Queues().QueueProps(ctx, q)
		if !bytes.Equal(s.JSON(), d.JSON()) {
			t.Errorf("%s: props %s on the target, %s on the source", q, d.JSON(), s.JSON())
		}
	}
	if l, _ := dst.core.Queues().DefaultProps(ctx); string(l.JSON()) != `[["^q",{"retry":4,"timeout":2}]]` {
		t.Errorf("default list %s", l.JSON())
	}
	// Own properties only where the default list does not give the value.
	kv, err := dst.js(t).KeyValue(ctx, mapping.PropsBucket)
	if err != nil {
		t.Fatal(err)
	}
	for q, own := range map[string]string{"q a+b": `{}`, "q/zero": `{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["x-trace"]]]},"retry":1,"timeout":0}`, "empty": `{"retry":1}`} {
		if e, err := kv.Get(ctx, mapping.PropsKey(q)); err != nil || string(e.Value()) != own {
			t.Errorf("%s: own properties on the target %v (%v), want %s", q, e, err, own)
		}
	}
	// timeout 0 makes every delivery unackable: drain q/zero with a real one.
	thirty := 30.0
	if err := dst.core.Queues().UpdateProps(ctx, "q/zero", mapping.Props{Timeout: &thirty}); err != nil {
		t.Fatal(err)
	}
	for q, bodies := range want {
		if q == "other" {
			continue
		}
		got, comp := drain(t, dst.core, q)
		seen := map[string]int{}
		for _, m := range got {
			b := string(m.Body)
			seen[b]++
			if m.ContentType != "text/plain" {
				t.Errorf("%s: %q has content-type %q", q, b, m.ContentType)
			}
			if q == "q/zero" && (len(m.Kept) != 1 || m.Kept[0] != gateway.Header{Name: "x-trace", Value: b}) {
				t.Errorf("%s: %q kept headers %v", q, b, m.Kept)
			}
		}
		extra := 0
		for _, b := range bodies {
			if seen[b] == 0 {
				t.Errorf("%s: %q lost", q, b)
			}
			extra += max(seen[b]-1, 0)
		}
		if len(got) != len(bodies)+extra {
			t.Errorf("%s: %d messages, want %d + %d duplicates", q, len(got), len(bodies), extra)
		}
		extras += int64(extra)
		if q == "q a+b" && (len(comp) != 1 || string(comp[0][1].Body) != "p2" || comp[0][1].Kept[0].Value != "x") {
			t.Errorf("compound message: %+v", comp)
		}
	}
	// Every duplicate reported is one; any other comes from an ack whose
	// answer was lost (reported as unconfirmed).
	if extras < dups || extras > dups+unconfirmed {
		t.Errorf("%d duplicates found, %d reported, %d unconfirmed", extras, dups, unconfirmed)
	}
	t.Logf("duplicates: %d found, %d reported, %d unconfirmed", extras, dups, unconfirmed)
	if _, err := dst.core.Inspect().Queue(ctx, "other"); err == nil {
		t.Error("queue other copied despite --queues")
	}
	if !strings.Contains(out.String(), "summary:") {
		t.Error("no summary")
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestJournalSettlesInterruptedMessages: a run that dies between storing a
// message and acking it on the source leaves a journal entry. A re-run while
// the source still holds that delivery acks it (no duplicate); a re-run after
// the delivery timed out recognises the message LMQ hands out again and
// reports the duplicate.
func TestJournalSettlesInterruptedMessages(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("late=%v", late), func(t *testing.T) {
			src, dst := startNode(t), startNode(t)
			ctx := ctxT(t, 60*time.Second)
			addr := freeAddr(t)
			serveLMQ(t, src.core, addr)
			timeout := 1.0
			if err := src.core.Queues().UpdateProps(ctx, "j", mapping.Props{Timeout: &timeout}); err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				if _, err := src.core.Messages().Push(ctx, "j", gateway.Message{Body: []byte(fmt.Sprint(i))}); err != nil {
					t.Fatal(err)
				}
			}
			timedOut := gateway.Signals(src.core).TimedOut
			timedOut.Init(t)
			var out bytes.Buffer
			opts := Options{From: "http://" + addr, NATS: dst.nc, MinSourceTimeout: -1, Linger: 5 * time.Second, Progress: -1}
			n := 0
			opts.beforeAck = func(string) error {
				if n++; n == 5 {
					return errors.New("killed")
				}
				return nil
			}
			if _, err := Migrate(ctx, opts, &out); err == nil {
				t.Fatal("the first run was not interrupted")
			}
			if late {
				// The source's delivery times out (1 s): its gateway, in
				// this process, then holds none.
				timedOut.WaitUntil("the source's deliveries timed out", func() bool { return src.core.Inspect().InFlight() == 0 })
			}
			opts.beforeAck = nil
			rep, err := Migrate(ctx, opts, &out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			got, _ := drain(t, dst.core, "j")
			wantDup := 0
			if late {
				wantDup = 1
			}
			if len(got) != 10+wantDup || rep.Duplicates != int64(wantDup) || rep.Resolved != 1-wantDup {
				t.Errorf("%d messages in the target, report: %d duplicates, %d resolved\n%s", len(got), rep.Duplicates, rep.Resolved, out.String())
			}
			j, err := openJournal(ctx, dst.js(t), opts.From, 1)
			if err != nil {
				t.Fatal(err)
			}
			if fl, err := j.flights(ctx); err != nil || len(fl) != 0 {
				t.Errorf("journal entries left: %v %v", fl, err)
			}
		})
	}
}
