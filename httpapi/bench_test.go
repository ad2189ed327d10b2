package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkHandlerCycle is LMQ's hot path over real HTTP on loopback: a
// push, a pull and its ack per iteration, through routing, middleware, query
// parsing, timeouts and answers (the fake core's own cost is small).
// cpu-ns/op is the process's CPU (server and client) per cycle, less
// sensitive than wall time to other work on the machine.
func BenchmarkHandlerCycle(b *testing.B) {
	srv := httptest.NewUnstartedServer(New(newFakeCore(), Options{
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
