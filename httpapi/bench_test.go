package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/fakecore"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/ops"
)

// BenchmarkHandlerCycle is LMQ's hot path over real HTTP on loopback: a
// push, a pull and its ack per iteration, through routing, middleware, query
// parsing, timeouts and answers (the fake core's own cost is small).
// cpu-ns/op is the process's CPU (server and client) per cycle, less
// sensitive than wall time to other work on the machine.
func BenchmarkHandlerCycle(b *testing.B) {
	srv := httptest.NewUnstartedServer(New(coreOf(fakecore.New()), Options{
		Logger:   quiet(),
		Timeouts: Timeouts{BodyIdle: time.Minute, MinRate: 1000, Write: time.Minute},
	}))
	srv.Config.ConnContext = ConnContext
	srv.Start()
	defer srv.Close()
	client := srv.Client()
	body := strings.Repeat("x", 256)
	do := func(method, target, body string, want int) http.Header {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, srv.URL+target, rd)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			b.Fatalf("%s %s: status %d, want %d", method, target, resp.StatusCode, want)
		}
		return resp.Header
	}
	b.ReportAllocs()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	for b.Loop() {
		do(http.MethodPost, "/messages/bench", body, http.StatusOK)
		id := do(http.MethodGet, "/messages/bench?t=0", "", http.StatusOK).Get("X-Lmq-Message-Id")
		do(http.MethodPost, "/messages/bench/"+id+"?reply=ack", "", http.StatusNoContent)
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// routeMessages answers push, pull and reply at once, and routeQueues a
// queue's properties, so that BenchmarkRoute measures the HTTP layers
// around them; the fake core's handles answer the rest.
type routeMessages struct {
	*fakecore.Messages
	d gateway.Delivery
}

type routeQueues struct{ *fakecore.Queues }

func (c *routeMessages) PushStream(_ context.Context, _ string, _ gateway.Message, body io.Reader, _ gateway.PushOptions) (gateway.AccumState, error) {
	_, err := io.Copy(io.Discard, body)
	return gateway.AccumNo, err
}

func (routeQueues) QueueProps(context.Context, string) (mapping.Effective, error) {
	return mapping.Effective{}, nil
}

func (c *routeMessages) Pull(context.Context, string, time.Duration) (*gateway.Delivery, error) {
	d := c.d
	return &d, nil
}

func (c *routeMessages) Reply(context.Context, string, string, gateway.ReplyKind) error { return nil }

// discardWriter is a ResponseWriter that keeps the header map only.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkRoute is one push, pull or reply through the handler New builds,
// with ops' middleware and routes mounted as the gateway does, in process
// (no network) on a core that answers at once: the cost of routing,
// middleware and the handler. Each iteration gets a fresh copy of the
// request, as a server would. cpu-ns/op (the process's CPU per request, GC
// included) is steadier than ns/op on a busy machine.
func BenchmarkRoute(b *testing.B) {
	o := ops.New(opsCoreOf(fakecore.New()), ops.NewStats(ops.StatsOptions{}), ops.Options{Logger: quiet()})
	f := fakecore.New()
	msgs := &routeMessages{Messages: f.Messages(), d: gateway.Delivery{Queue: "bench", ID: "00000000-0000-4000-8000-000000000001", RetryRemaining: 2,
		Message: gateway.Message{ContentType: "text/plain", Body: []byte(strings.Repeat("x", 256))}}}
	h := New(Core{Messages: msgs, Queues: routeQueues{f.Queues()}, Inspect: f.Inspect()}, Options{Logger: quiet(), Mount: o.Mount, Middleware: o.Middleware})
	body := strings.Repeat("x", 256)
	for _, c := range []struct {
		name, method, target string
		body                 bool
		want                 int
	}{
		{"push", http.MethodPost, "/messages/bench", true, http.StatusOK},
		{"pull", http.MethodGet, "/messages/bench?t=0", false, http.StatusOK},
		{"reply", http.MethodPost, "/messages/bench/00000000-0000-4000-8000-000000000001?reply=ack", false, http.StatusNoContent},
	} {
		b.Run(c.name, func(b *testing.B) {
			tmpl := httptest.NewRequest(c.method, c.target, nil)
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			var before, after syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			for b.Loop() {
				r := new(http.Request)
				*r = *tmpl
				if c.body {
					r.Body = io.NopCloser(strings.NewReader(body))
					r.ContentLength = int64(len(body))
				}
				clear(w.h)
				w.status = http.StatusOK
				h.ServeHTTP(w, r)
				if w.status != c.want {
					b.Fatalf("%s %s: %d, want %d", c.method, c.target, w.status, c.want)
				}
			}
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
