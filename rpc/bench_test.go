package rpc

import (
	"bufio"
	"context"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/fakecore"
	"github.com/lmq-gateway/lmq-gateway/rpc/wire"
)

// discardCore answers every push at once and keeps nothing: what is left of
// a push's cost is the front end's (and the client's).
type discardMessages struct{ *fakecore.Messages }

func (discardMessages) PushWith(context.Context, string, gateway.Message, gateway.PushOptions) (gateway.AccumState, error) {
	return gateway.AccumNo, nil
}

// BenchmarkPushRoundTrip is closed-loop pushes of 256 bytes, one request in
// flight per connection, as many connections as GOMAXPROCS×4. cpu-µs/op is
// the process's CPU (server and client) per push.
func BenchmarkPushRoundTrip(b *testing.B) {
	f := fakecore.New()
	addr, _ := startServer(b, Core{Messages: discardMessages{f.Messages()}, Queues: f.Queues(), Inspect: f.Inspect()}, Options{})
	req := encodeRequest(b, 1, "push", "bench", strings.Repeat("x", 256))
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			b.Error(err)
			return
		}
		defer nc.Close()
		fr := wire.NewFrameReader(bufio.NewReader(nc), wire.Limits{})
		for pb.Next() {
			if _, err := nc.Write(req); err != nil {
				b.Error(err)
				return
			}
			if _, err := fr.ReadFrame(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}
