package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSQS is the least of an SQS JSON 1.0 server the sqs target needs:
// CreateQueue, DeleteQueue, SendMessage, ReceiveMessage (one message, long
// polls) and DeleteMessage, in memory. It checks what every request must
// carry, and records the waits asked for.
type fakeSQS struct {
	t *testing.T

	mu      sync.Mutex
	queues  map[string]*fakeQueue
	handles int
	waits   []int // WaitTimeSeconds of each ReceiveMessage
	// polled hears of each ReceiveMessage once it is registered (a send
	// after it wakes it up); not sent to when full.
	polled   chan struct{}
	requests int
}

type fakeQueue struct {
	ready    []string          // bodies
	inFlight map[string]string // receipt handle → body
	// arrived is closed (and replaced) when a message is sent.
	arrived chan struct{}
}

func newFakeSQS(t *testing.T) (*fakeSQS, string) {
	f := &fakeSQS{t: t, queues: make(map[string]*fakeQueue), polled: make(chan struct{}, 64)}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, strings.TrimPrefix(srv.URL, "http://")
}

func (f *fakeSQS) fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.sqs#" + code, "message": msg})
}

func (f *fakeSQS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	action, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/":
		f.fail(w, http.StatusBadRequest, "InvalidAction", r.Method+" "+r.URL.Path)
		return
	case !ok || r.Header.Get("Content-Type") != "application/x-amz-json-1.0":
		f.fail(w, http.StatusBadRequest, "InvalidAction", "not AWS JSON 1.0")
		return
	case r.Header.Get("Authorization") != "":
		f.fail(w, http.StatusBadRequest, "InvalidAction", "the bench signs nothing")
		return
	}
	var in struct {
		QueueName, QueueUrl, MessageBody, ReceiptHandle string
		MaxNumberOfMessages, WaitTimeSeconds            int
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		f.fail(w, http.StatusBadRequest, "InvalidParameterValue", err.Error())
		return
	}
	f.mu.Lock()
	f.requests++
	name := in.QueueName
	if action != "CreateQueue" {
		name = in.QueueUrl[strings.LastIndex(in.QueueUrl, "/")+1:]
		if want := "http://" + r.Host + "/" + sqsDefaultAccount + "/" + name; in.QueueUrl != want {
			f.mu.Unlock()
			f.fail(w, http.StatusBadRequest, "InvalidAddress", "queue URL "+in.QueueUrl+", want "+want)
			return
		}
	}
	q := f.queues[name]
	if q == nil && action != "CreateQueue" {
		f.mu.Unlock()
		f.fail(w, http.StatusBadRequest, "QueueDoesNotExist", "The specified queue does not exist.")
		return
	}
	var out any = struct{}{}
	switch action {
	case "CreateQueue":
		if q == nil {
			f.queues[name] = &fakeQueue{inFlight: make(map[string]string), arrived: make(chan struct{})}
		}
		out = map[string]string{"QueueUrl": "http://" + r.Host + "/" + sqsDefaultAccount + "/" + name}
	case "DeleteQueue":
		delete(f.queues, name)
	case "SendMessage":
		q.ready = append(q.ready, in.MessageBody)
		close(q.arrived)
		q.arrived = make(chan struct{})
		out = map[string]string{"MessageId": fmt.Sprint(f.requests), "MD5OfMessageBody": "unchecked"}
	case "DeleteMessage":
		if _, ok := q.inFlight[in.ReceiptHandle]; !ok {
			f.mu.Unlock()
			f.fail(w, http.StatusBadRequest, "ReceiptHandleIsInvalid", in.ReceiptHandle)
			return
		}
		delete(q.inFlight, in.ReceiptHandle)
	case "ReceiveMessage":
		f.waits = append(f.waits, in.WaitTimeSeconds)
		select {
		case f.polled <- struct{}{}:
		default:
		}
		if in.MaxNumberOfMessages != 1 {
			f.mu.Unlock()
			f.fail(w, http.StatusBadRequest, "InvalidParameterValue", "the bench asks for one message")
			return
		}
		deadline := time.After(time.Duration(in.WaitTimeSeconds) * time.Second)
		for len(q.ready) == 0 && in.WaitTimeSeconds > 0 {
			arrived := q.arrived
			f.mu.Unlock()
			select {
			case <-arrived:
			case <-deadline:
			case <-r.Context().Done():
			}
			f.mu.Lock()
			if f.queues[name] != q {
				f.mu.Unlock()
				f.fail(w, http.StatusBadRequest, "QueueDoesNotExist", "deleted while polling")
				return
			}
			select {
			case <-deadline:
				in.WaitTimeSeconds = 0
			default:
			}
		}
		type msg struct{ MessageId, ReceiptHandle, MD5OfBody, Body string }
		var ms []msg
		if len(q.ready) > 0 {
			f.handles++
			h := fmt.Sprintf("handle-%d", f.handles)
			q.inFlight[h] = q.ready[0]
			ms = append(ms, msg{fmt.Sprint(f.handles), h, "unchecked", q.ready[0]})
			q.ready = q.ready[1:]
		}
		out = struct {
			Messages []msg `json:",omitempty"`
		}{ms}
	default:
		f.mu.Unlock()
		f.fail(w, http.StatusBadRequest, "UnsupportedOperation", action)
		return
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_ = json.NewEncoder(w).Encode(out)
}

func (f *fakeSQS) state(queue string) (ready, inFlight int, exists bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues[queue]
	if q == nil {
		return 0, 0, false
	}
	return len(q.ready), len(q.inFlight), true
}

func TestSQSTarget(t *testing.T) {
	t.Parallel()
	f, addr := newFakeSQS(t)
	ctx := t.Context()
	tg := newSQSTarget(addr, sqsDefaultAccount, 2)
	defer tg.close()
	if err := tg.setup(ctx, "q-1"); err != nil {
		t.Fatal(err)
	}
	c, err := tg.newClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	body := newBody(300)
	epoch := time.Now()
	at := epoch.Add(1234567 * time.Microsecond)
	stamp(body, epoch, at)
	if err := c.push(ctx, "q-1", body); err != nil {
		t.Fatal(err)
	}
	got, ack, err := c.pull(ctx, "q-1", 0)
	if err != nil || ack == nil {
		t.Fatalf("pull: %v, ack %v", err, ack != nil)
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("pulled %q, pushed %q", got, body)
	}
	if ts, ok := stampedAt(got, epoch); !ok || !ts.Equal(at) {
		t.Errorf("stamp read back as %v, %v; want %v", ts, ok, at)
	}
	if _, inFlight, _ := f.state("q-1"); inFlight != 1 {
		t.Errorf("%d in flight before the ack, want 1", inFlight)
	}
	if err := ack(ctx); err != nil {
		t.Fatal(err)
	}
	if ready, inFlight, _ := f.state("q-1"); ready != 0 || inFlight != 0 {
		t.Errorf("after the ack: %d ready, %d in flight", ready, inFlight)
	}
	if err := ack(ctx); err == nil {
		t.Error("a second DeleteMessage of the same handle succeeded on the fake")
	}

	// An empty queue: no message, no ack, and the wait in whole seconds.
	if _, ack, err := c.pull(ctx, "q-1", 0); err != nil || ack != nil {
		t.Fatalf("empty pull: %v, ack %v", err, ack != nil)
	}
	// A long poll that a push ends. (Three pulls reached the fake: setup's,
	// the one with the message, the empty one.)
	for range 3 {
		<-f.polled
	}
	done := make(chan error, 1)
	go func() {
		_, ack, err := c.pull(ctx, "q-1", 100*time.Millisecond)
		if err == nil && ack == nil {
			err = errors.New("long poll ended without the message")
		}
		done <- err
	}()
	pusher, _ := tg.newClient(ctx)
	select {
	case <-f.polled:
	case err := <-done:
		t.Fatalf("long poll ended before it reached the server: %v", err)
	}
	if err := pusher.push(ctx, "q-1", body); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	waits := fmt.Sprint(f.waits)
	f.mu.Unlock()
	if waits != "[0 0 0 1]" {
		t.Errorf("WaitTimeSeconds sent: %s, want [0 0 0 1]", waits)
	}

	// remove deletes; a queue already gone is not an error.
	if err := tg.remove(ctx, "q-1"); err != nil {
		t.Fatal(err)
	}
	if _, _, exists := f.state("q-1"); exists {
		t.Error("queue still exists after remove")
	}
	if err := tg.remove(ctx, "q-1"); err != nil {
		t.Errorf("removing a removed queue: %v", err)
	}
	var se *sqsError
	if err := c.push(ctx, "q-1", body); !errors.As(err, &se) || !se.isNoQueue() || se.status != http.StatusBadRequest {
		t.Errorf("push to a deleted queue: %v, want QueueDoesNotExist", err)
	}
}

func TestSQSWaitAndBody(t *testing.T) {
	t.Parallel()
	for wait, want := range map[time.Duration]int{
		-time.Second: 0, 0: 0, time.Nanosecond: 1, 50 * time.Millisecond: 1, time.Second: 1,
		1001 * time.Millisecond: 2, 20 * time.Second: 20, time.Minute: 20,
	} {
		if got := sqsWaitSeconds(wait); got != want {
			t.Errorf("sqsWaitSeconds(%v) = %d, want %d", wait, got, want)
		}
	}
	if _, err := sqsEncodeBody([]byte("short")); err == nil {
		t.Error("a body shorter than its stamp encoded")
	}
	if _, err := sqsEncodeBody(append(make([]byte, tsLen), 0xff)); err == nil {
		t.Error("a body that is not text encoded")
	}
	if _, err := sqsDecodeBody("zz"+strings.Repeat("0", sqsStampHex), nil); err == nil {
		t.Error("a body without a hex stamp decoded")
	}
}

// TestSQSBenchRun runs push, pull and mixed cells of the sqs target, through
// the bench as a user runs it (--sqs of a running server), on the fake.
func TestSQSBenchRun(t *testing.T) {
	t.Parallel()
	_, addr := newFakeSQS(t)
	cfg, err := parseFlags([]string{
		"--sqs", addr, "--targets", "sqs", "--workloads", "push,pull,mixed",
		"--conc", "2", "--sizes", "256", "--queues", "3",
		"--duration", "80ms", "--pull-wait", "200ms", "--setup-conc", "2",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.spawn {
		t.Fatal("--sqs did not turn spawning off")
	}
	var logs bytes.Buffer
	b, err := newBench(cfg, &logs)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := b.run(context.Background(), &out); err != nil {
		t.Fatalf("run: %v\nlogs:\n%s", err, logs.String())
	}
	if len(b.cells) != 3 {
		t.Fatalf("%d cells, want push, pull, mixed\nlogs:\n%s", len(b.cells), logs.String())
	}
	for _, c := range b.cells {
		if c.target != tSQS || c.msgs <= 0 || c.errors > 0 || c.missing > 0 {
			t.Errorf("cell %s %s: %d msgs, %d errors, %d missing (%s)", c.workload, c.target, c.msgs, c.errors, c.missing, c.firstErr)
		}
	}
	if !strings.Contains(out.String(), "| sqs |") {
		t.Errorf("report has no sqs rows:\n%s", out.String())
	}
}

// TestSQSPortsFile: the spawned gateway's SQS port is read from its ports
// file once the file says it is complete.
func TestSQSPortsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "ports.json")
	if err := os.WriteFile(path, []byte(`{"http":"127.0.0.1:1","sqs":"127.0.0.1:9324","complete":true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := sqsPort(t.Context(), path, nil); err != nil || got != "127.0.0.1:9324" {
		t.Errorf("sqsPort = %q, %v", got, err)
	}
	if err := os.WriteFile(path, []byte(`{"http":"127.0.0.1:1","complete":true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sqsPort(t.Context(), path, nil); err == nil {
		t.Error("a complete ports file without sqs accepted")
	}
	exited := make(chan struct{})
	close(exited)
	if err := os.WriteFile(path, []byte(`{"nats":"127.0.0.1:2"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sqsPort(t.Context(), path, exited); err == nil {
		t.Error("an incomplete ports file of an exited gateway accepted")
	}
}
