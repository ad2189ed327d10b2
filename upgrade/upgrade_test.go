package upgrade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/embedded"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/logbuf"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testcore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// legacyStreamConfig is the stream of a queue as the gateway of commit
// 61f8f84 configured it (its streamConfig), with that version's names.
func legacyStreamConfig(queue string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: mapping.LegacyStreamName(queue),
		Subjects: []string{mapping.LegacyQueueSubject(queue), mapping.LegacyPartSubject(queue),
			mapping.LegacyScheduleWildcard(queue), mapping.LegacyDeadSubject(queue)},
		Retention:          jetstream.WorkQueuePolicy,
		Storage:            jetstream.FileStorage,
		Replicas:           1,
		Metadata:           map[string]string{mapping.MetaQueueName: queue},
		AllowMsgTTL:        true,
		AllowMsgSchedules:  true,
		AllowAtomicPublish: true,
		AllowRollup:        true,
	}
}

// oldLayout writes queues of the old layout straight into JetStream.
type oldLayout struct {
	t   *testing.T
	js  jetstream.JetStream
	ctx context.Context
}

func (o *oldLayout) queue(name string) {
	o.t.Helper()
	st, err := o.js.CreateStream(o.ctx, legacyStreamConfig(name))
	if err != nil {
		o.t.Fatal(err)
	}
	if _, err := st.CreateOrUpdateConsumer(o.ctx, jetstream.ConsumerConfig{
		Durable: mapping.LegacyConsumerName, FilterSubject: mapping.LegacyQueueSubject(name),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour,
	}); err != nil {
		o.t.Fatal(err)
	}
}

// msg stores a message as the old gateway did: body and Lmq-* headers.
func (o *oldLayout) msg(subject, body string, hdr ...string) {
	o.t.Helper()
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	m.Header.Set(mapping.HdrContentType, "text/plain")
	m.Header.Set(mapping.HdrRetry, "2")
	m.Header.Set(mapping.HdrPushedAt, strconv.FormatInt(time.Now().UnixNano(), 10))
	for i := 0; i+1 < len(hdr); i += 2 {
		m.Header.Set(hdr[i], hdr[i+1])
	}
	if _, err := o.js.PublishMsg(o.ctx, m); err != nil {
		o.t.Fatal(err)
	}
}

// startCore starts a NATS server and a core on it with cfg: what an
// upgrade runs beside.
func startCore(t *testing.T, cfg gateway.Config) (*embedded.Server, *nats.Conn, *gateway.Gateway) {
	t.Helper()
	ns := testnats.Start(t)
	nc := testnats.Connect(t, ns, "core")
	return ns, nc, testcore.New(t, nc, cfg)
}

// TestUpgradeLegacy builds the old layout with nats.go (one stream per
// queue, a hashed long name, properties under the old key, a message in
// flight, a delayed one, an expired one, a ttl, a dead letter, parts and a
// close job), interrupts an upgrade after two messages, runs it again, and
// accounts for every message.
func TestUpgradeLegacy(t *testing.T) {
	logs := &logbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	ns, nc, g := startCore(t, gateway.Config{Logger: log})
	deps := Deps{NATS: bus.New(nc), Core: Core{Gateway: g, Logs: g.Logs()}, Logger: log}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	onc := testnats.Connect(t, ns, "old")
	ojs := testnats.JetStream(t, onc)
	o := &oldLayout{t: t, js: ojs, ctx: ctx}
	pkv, err := ojs.KeyValue(ctx, mapping.PropsBucket)
	if err != nil {
		t.Fatal(err)
	}

	long := "long-" + strings.Repeat("n", 195)
	plain, acc := "a/b c", "acc"
	for _, q := range []string{plain, long, acc} {
		o.queue(q)
	}
	if !strings.HasPrefix(mapping.LegacyEncodeName(long), "_") {
		t.Fatal("the long name is not hashed in the old layout")
	}
	o.msg(mapping.LegacyQueueSubject(plain), "one", mapping.HdrKeepPrefix+"X-Trace", "t1")
	o.msg(mapping.LegacyQueueSubject(plain), "two", mapping.HdrDelivered, "1")
	o.msg(mapping.LegacyQueueSubject(plain), "gone", mapping.HdrExpires, strconv.FormatInt(time.Now().Add(-time.Second).UnixNano(), 10))
	o.msg(mapping.LegacyQueueSubject(plain), "ttl", mapping.HdrExpires, strconv.FormatInt(time.Now().Add(time.Hour).UnixNano(), 10))
	due := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	o.msg(strings.TrimSuffix(mapping.LegacyScheduleWildcard(plain), "*")+"id1", "later",
		"Nats-Schedule", "@at "+due, "Nats-Schedule-Target", mapping.LegacyQueueSubject(plain))
	o.msg(mapping.LegacyDeadSubject(plain), "dead", mapping.HdrDelivered, "3", mapping.HdrDeadAt, time.Now().UTC().Format(time.RFC3339Nano))
	o.msg(mapping.LegacyQueueSubject(long), "long-1")
	o.msg(mapping.LegacyQueueSubject(long), "long-2")
	o.msg(mapping.LegacyPartSubject(acc), "part-1", mapping.HdrWindow, "w1")
	o.msg(mapping.LegacyPartSubject(acc), "part-2", mapping.HdrWindow, "w1")

	// "one" is in flight at the old gateway (delivered, never acked).
	oc, err := ojs.Consumer(ctx, mapping.LegacyStreamName(plain), mapping.LegacyConsumerName)
	if err != nil {
		t.Fatal(err)
	}
	b, err := oc.Fetch(1)
	if err != nil {
		t.Fatal(err)
	}
	for range b.Messages() {
	}
	// Own properties under the old (hashed) key, and a close job of the
	// accumulating queue whose cut is an old sequence.
	if _, err := pkv.Put(ctx, mapping.LegacyPropsKey(long), []byte(`{"retry":4}`)); err != nil {
		t.Fatal(err)
	}
	akv, err := ojs.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: mapping.AccumBucket})
	if err != nil {
		t.Fatal(err)
	}
	jobKey := "j." + mapping.EncodeName(acc) + ".w1"
	if _, err := akv.Put(ctx, jobKey, []byte(`{"id":"w1","queue":"acc","state":"publishing","cut":2,"lq":2}`)); err != nil {
		t.Fatal(err)
	}

	// An upgrade stopped after three messages (the test hook), then a full one.
	t.Setenv(PauseEnv, "3")
	uctx, ucancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(uctx, deps) }()
	testwait.For(t, "the upgrade paused by the test hook", func() bool { return strings.Contains(logs.String(), "upgrade paused by the test hook") })
	ucancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("paused upgrade: %v", err)
	}
	t.Setenv(PauseEnv, "")
	if err := Run(ctx, deps); err != nil {
		t.Fatal(err)
	}

	// The old streams are gone, the lock is released.
	for _, q := range []string{plain, long, acc} {
		if _, err := ojs.Stream(ctx, mapping.LegacyStreamName(q)); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Fatalf("old stream of %q: %v", q, err)
		}
	}
	if _, err := pkv.Get(ctx, lockKey); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("lock key left: %v", err)
	}
	// Properties moved to the new key.
	if _, err := pkv.Get(ctx, mapping.LegacyPropsKey(long)); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("old properties key left: %v", err)
	}
	testwait.For(t, "the moved properties (retry 4) seen by the gateway", func() bool {
		p, err := g.Queues().QueueProps(ctx, long)
		return err == nil && p.Retry == 4
	})

	// Deliverable messages in order, with their metadata; the expired one dropped.
	pull := func(q string) *gateway.Delivery {
		t.Helper()
		d, err := g.Messages().Pull(ctx, q, 0)
		if err != nil {
			t.Fatal(err)
		}
		if d != nil {
			if err := g.Messages().Reply(ctx, q, d.ID, gateway.Ack); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	type want struct {
		body  string
		retry int
	}
	// "one" was handed out once (3 deliveries, one used): 2 left counting
	// this one; "two" had Lmq-Delivered 1: the same.
	for _, w := range []want{{"one", 1}, {"two", 1}, {"ttl", 2}} {
		d := pull(plain)
		if d == nil || string(d.Message.Body) != w.body || d.RetryRemaining != w.retry || d.Message.ContentType != "text/plain" {
			t.Fatalf("want %+v, got %+v", w, d)
		}
		if w.body == "one" && (len(d.Message.Kept) != 1 || d.Message.Kept[0].Value != "t1") {
			t.Fatalf("kept headers of %q: %+v", w.body, d.Message.Kept)
		}
	}
	if d := pull(plain); d != nil {
		t.Fatalf("unexpected %q", d.Message.Body)
	}
	// The retry is fixed per message at push (Lmq-Retry 2), not by the properties.
	for _, w := range []string{"long-1", "long-2"} {
		if d := pull(long); d == nil || string(d.Message.Body) != w || d.RetryRemaining != 2 {
			t.Fatalf("want %q, got %+v", w, d)
		}
	}
	det, err := g.Inspect().QueueDetail(ctx, plain)
	if err != nil || det.Delayed != 1 || det.DeadLetters != 1 {
		t.Fatalf("detail %+v %v", det, err)
	}
	shard, err := ojs.Stream(ctx, mapping.StreamName(plain))
	if err != nil {
		t.Fatal(err)
	}
	sm, err := shard.GetLastMsgForSubject(ctx, mapping.ScheduleSubject(plain, "id1"))
	if err != nil || sm.Header.Get("Nats-Schedule-Target") != mapping.QueueSubject(plain) || sm.Header.Get("Nats-Schedule") != "@at "+due {
		t.Fatalf("schedule %+v %v", sm, err)
	}
	dl, err := g.Inspect().DeadLetterHead(ctx, plain)
	if err != nil || dl == nil || string(dl.Message.Body) != "dead" || dl.Deliveries != 3 {
		t.Fatalf("dead letter %+v %v", dl, err)
	}
	adet, err := g.Inspect().QueueDetail(ctx, acc)
	if err != nil || adet.Parts != 2 {
		t.Fatalf("acc detail %+v %v", adet, err)
	}
	// The close job's cut covers the moved parts.
	e, err := akv.Get(ctx, jobKey)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Cut   uint64 `json:"cut"`
		LQ    uint64 `json:"lq"`
		State string `json:"state"`
	}
	if err := json.Unmarshal(e.Value(), &j); err != nil {
		t.Fatal(err)
	}
	ashard, err := ojs.Stream(ctx, mapping.StreamName(acc))
	if err != nil {
		t.Fatal(err)
	}
	last, err := ashard.GetLastMsgForSubject(ctx, mapping.PartSubject(acc))
	if err != nil || j.Cut < last.Sequence || j.LQ != 0 || j.State != "publishing" {
		t.Fatalf("job %+v, last part %v %v", j, last, err)
	}
	// Nothing was stored twice: each queue's subjects hold exactly what is
	// left (a schedule and a dead letter; two parts; nothing).
	for q, want := range map[string]int{plain: 2, long: 0, acc: 2} {
		st, err := ojs.Stream(ctx, mapping.StreamName(q))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, filter := range mapping.QueueSubjects(q) {
			for seq := uint64(1); ; n++ {
				m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
				if errors.Is(err, jetstream.ErrMsgNotFound) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				seq = m.Sequence + 1
			}
		}
		if n != want {
			t.Errorf("%q: %d messages left in its shard, want %d", q, n, want)
		}
	}
	// A second run finds nothing to do.
	if err := Run(ctx, deps); err != nil {
		t.Fatal(err)
	}
}

// TestUpgradeLegacyTwoGateways: two gateways upgrade the same old layout at
// once; one holds the lock, the other waits, and every message is moved
// exactly once.
func TestUpgradeLegacyTwoGateways(t *testing.T) {
	t.Parallel()
	ns := testnats.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var deps []Deps
	var logs []*logbuf.Buffer
	for i := range 2 {
		buf := &logbuf.Buffer{}
		log := slog.New(slog.NewTextHandler(buf, nil))
		nc := testnats.Connect(t, ns, fmt.Sprint("core", i))
		g, err := gateway.New(ctx, bus.New(nc), gateway.Config{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Close)
		deps = append(deps, Deps{NATS: bus.New(nc), Core: Core{Gateway: g, Logs: g.Logs()}, Logger: log})
		logs = append(logs, buf)
	}
	ojs := testnats.JetStream(t, testnats.Connect(t, ns, "old"))
	o := &oldLayout{t: t, js: ojs, ctx: ctx}
	const queues, msgs = 12, 40
	for i := range queues {
		q := fmt.Sprintf("q%02d", i)
		o.queue(q)
		for j := range msgs {
			o.msg(mapping.LegacyQueueSubject(q), fmt.Sprint(j))
		}
	}
	errs := make(chan error, 2)
	for _, d := range deps {
		go func() { errs <- Run(ctx, d) }()
	}
	for range deps {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	moved := 0
	for _, l := range logs {
		moved += strings.Count(l.String(), "upgraded queue")
	}
	if moved != queues {
		t.Errorf("%d queues upgraded, want %d", moved, queues)
	}
	for i := range queues {
		q := fmt.Sprintf("q%02d", i)
		if _, err := ojs.Stream(ctx, mapping.LegacyStreamName(q)); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Fatalf("old stream of %q: %v", q, err)
		}
		st, err := ojs.Stream(ctx, mapping.StreamName(q))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for seq := uint64(1); ; {
			m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(mapping.QueueSubject(q)))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(m.Data))
			seq = m.Sequence + 1
		}
		if len(got) != msgs {
			t.Fatalf("%q: %d messages, want %d", q, len(got), msgs)
		}
		for j, b := range got {
			if b != fmt.Sprint(j) {
				t.Fatalf("%q: message %d is %q", q, j, b)
			}
		}
	}
}

// TestRunNothingToDo: without old streams Run returns at once and leaves
// nothing behind (no lock key).
func TestRunNothingToDo(t *testing.T) {
	t.Parallel()
	_, nc, g := startCore(t, gateway.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Run(ctx, Deps{NATS: bus.New(nc), Core: Core{Gateway: g, Logs: g.Logs()}}); err != nil {
		t.Fatal(err)
	}
	kv, err := testnats.JetStream(t, nc).KeyValue(ctx, mapping.PropsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, lockKey); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("lock key: %v", err)
	}
}

// TestRunIgnoresDeadline: an upgrade may take longer than a start attempt
// allows, so a deadline that has passed does not stop it (a cancel does:
// TestUpgradeLegacy).
func TestRunIgnoresDeadline(t *testing.T) {
	t.Parallel()
	ns, nc, g := startCore(t, gateway.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ojs := testnats.JetStream(t, testnats.Connect(t, ns, "old"))
	o := &oldLayout{t: t, js: ojs, ctx: ctx}
	o.queue("q")
	o.msg(mapping.LegacyQueueSubject("q"), "m")
	expired, ecancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer ecancel()
	if err := Run(expired, Deps{NATS: bus.New(nc), Core: Core{Gateway: g, Logs: g.Logs()}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ojs.Stream(ctx, mapping.LegacyStreamName("q")); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("old stream: %v", err)
	}
	d, err := g.Messages().Pull(ctx, "q", 0)
	if err != nil || d == nil || string(d.Message.Body) != "m" {
		t.Fatalf("pull: %+v %v", d, err)
	}
}

// TestRunTakesItsOwnLeftLock: a lock left by an earlier attempt of the same
// gateway (one that failed before its unlock took effect) is taken at once.
// It answers as alive on this gateway's own liveness subject, so waiting for
// it would last the whole lease (a start under load failed that way).
func TestRunTakesItsOwnLeftLock(t *testing.T) {
	t.Parallel()
	logs := &logbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	ns, nc, g := startCore(t, gateway.Config{Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ojs := testnats.JetStream(t, testnats.Connect(t, ns, "old"))
	o := &oldLayout{t: t, js: ojs, ctx: ctx}
	o.queue("q")
	o.msg(mapping.LegacyQueueSubject("q"), "m")
	pkv, err := ojs.KeyValue(ctx, mapping.PropsBucket)
	if err != nil {
		t.Fatal(err)
	}
	left, _ := json.Marshal(lockValue{Owner: g.ID(), Expires: time.Now().Add(time.Hour).UnixNano()})
	if _, err := pkv.Put(ctx, lockKey, left); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Deps{NATS: bus.New(nc), Core: Core{Gateway: g, Logs: g.Logs()}, Logger: log}) }()
	var runErr error
	finished := false
	testwait.For(t, "Run returns, or waits for its own lock", func() bool {
		select {
		case runErr = <-done:
			finished = true
			return true
		default:
			return strings.Contains(logs.String(), "waiting for another gateway")
		}
	})
	if !finished {
		t.Fatalf("Run waits for the lock its own gateway left:\n%s", logs)
	}
	if runErr != nil {
		t.Fatal(runErr)
	}
	if _, err := ojs.Stream(ctx, mapping.LegacyStreamName("q")); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("old stream: %v", err)
	}
}
