package gateway_test

import (
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

func BenchmarkPush(b *testing.B) {
	g := newCoreTB(b)
	ctx := ctxT(b)
	msg := gateway.Message{ContentType: "text/plain", Body: make([]byte, 256)}
	b.SetParallelism(8)
	b.ResetTimer()
	cpu0 := cpuSeconds()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Messages().Push(ctx, "bench", msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	reportCPU(b, cpu0)
}

// reportCPU reports the process's CPU time (gateway core and embedded NATS,
// all goroutines) per operation since cpu0: less sensitive to other load on
// the machine than ns/op.
func reportCPU(b *testing.B, cpu0 float64) {
	b.StopTimer()
	b.ReportMetric((cpuSeconds()-cpu0)*1e6/float64(b.N), "cpu-µs/op")
}

func BenchmarkPullAck(b *testing.B) {
	g := newCoreTB(b)
	ctx := ctxT(b)
	msg := gateway.Message{ContentType: "text/plain", Body: make([]byte, 256)}
	for i := 0; i < b.N; i++ {
		if _, err := g.Messages().Push(ctx, "bench", msg); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	b.SetParallelism(8)
	cpu0 := cpuSeconds()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			d, err := g.Messages().Pull(ctx, "bench", time.Second)
			if err != nil || d == nil {
				b.Fatal(err)
			}
			if err := g.Messages().Reply(ctx, "bench", d.ID, gateway.Ack); err != nil {
				b.Fatal(err)
			}
		}
	})
	reportCPU(b, cpu0)
}
