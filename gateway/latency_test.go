package gateway_test

import (
	"context"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

func TestLatencyProbe(t *testing.T) {
	if os.Getenv("LMQ_LATENCY") == "" {
		t.Skip("set LMQ_LATENCY=1")
	}
	g := newCore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := g.Pull(ctx, "lat", 200*time.Millisecond)
				if err != nil || d == nil {
					continue
				}
				ns, _ := strconv.ParseInt(string(d.Message.Body), 10, 64)
				mu.Lock()
				lat = append(lat, time.Since(time.Unix(0, ns)))
				mu.Unlock()
				_ = g.Reply(ctx, "lat", d.ID, gateway.Ack)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	tick := time.NewTicker(500 * time.Microsecond)
	for i := 0; i < 6000; i++ {
		<-tick.C
		go g.Push(ctx, "lat", gateway.Message{Body: []byte(strconv.FormatInt(time.Now().UnixNano(), 10))})
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	n := len(lat)
	t.Logf("n=%d p50=%v p99=%v p999=%v max=%v", n, lat[n/2], lat[n*99/100], lat[n*999/1000], lat[n-1])
}
