package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestManyInFlight: 5,000 messages pulled and not acked on one queue must not
// block further pulls (JetStream's default MaxAckPending is 1,000).
//
// Not parallel: it loads both cores, which would disturb the timing
// assertions of the parallel tests.
func TestManyInFlight(t *testing.T) {
	heavy(t, "a load")
	const n = 5000
	_, c := StartClient(t)
	const q = "load-in-flight"
	// Nothing may time out while the test runs: every body must come once.
	c.PatchProps(q, `{"timeout":300}`)

	start := time.Now()
	err := concurrently(n, 16, func(ctx context.Context, i int) error {
		return c.TryPush(ctx, q, []byte(strconv.Itoa(i)))
	})
	if err != nil {
		t.Fatal(err)
	}
	pushed := time.Since(start)

	var mu sync.Mutex
	got := make(map[string]bool, n)
	err = concurrently(n, 16, func(ctx context.Context, i int) error {
		r, err := c.Send(ctx, http.MethodGet, "/messages/"+q+"?t=5", nil)
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK {
			return fmt.Errorf("pull %d with %d in flight: %v", i, i, r)
		}
		mu.Lock()
		defer mu.Unlock()
		if got[string(r.Body)] {
			return fmt.Errorf("message %s delivered twice", r.Body)
		}
		got[string(r.Body)] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pushes in %v, %d pulls in %v", n, pushed, n, time.Since(start)-pushed)

	// Still not blocked with all of them in flight.
	if r := c.Pull(q, "0"); r.Status != http.StatusNoContent {
		t.Errorf("pull t=0 with %d in flight: %v, want 204", n, r)
	}
	c.Push(q, []byte("one more"), "")
	c.MustPull(q, msgWait, "one more")
}

// concurrently runs fn for 0..n-1 on up to workers goroutines and returns
// the first error; after it, no new call starts. Every call is bounded by
// requestTimeout.
func concurrently(n, workers int, fn func(ctx context.Context, i int) error) error {
	var next atomic.Int64
	var once sync.Once
	var first error
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
				err := fn(ctx, i)
				cancel()
				if err != nil {
					once.Do(func() { first = err; failed.Store(true) })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// TestLargePayloads: bodies round-trip byte-exact on the embedded server,
// below, at and above its max_payload (8 MiB by default) up to 64 MiB.
func TestLargePayloads(t *testing.T) {
	heavy(t, "64 MiB bodies")
	gw := Start(t)
	testPayloads(t, gw.Client(t), []int{0, 1, 1<<20 + 1, 8<<20 - 1024, 8 << 20, 8<<20 + 1, 64 << 20})
}

// TestLargePayloadsExternalNATS: the same on a stock nats-server with its
// default 1 MiB max_payload, which the gateway reaches by --nats-url.
func TestLargePayloadsExternalNATS(t *testing.T) {
	heavy(t, "64 MiB bodies")
	gw := StartWithNATS(t, StartNATS(t))
	testPayloads(t, gw.Client(t), []int{0, 1000, 1<<20 - 1024, 1 << 20, 1<<20 + 1, 64 << 20})
}

func testPayloads(t *testing.T, c *Client, sizes []int) {
	const q = "load-large"
	rng := rand.NewChaCha8([32]byte{'l', 'm', 'q'}) // incompressible, reproducible
	bodies := make([][]byte, len(sizes))
	for i, size := range sizes {
		bodies[i] = make([]byte, size)
		_, _ = rng.Read(bodies[i])
		c.Push(q, bodies[i], "application/x-size-"+strconv.Itoa(size))
	}
	for i, size := range sizes {
		r := c.Pull(q, "10")
		if r.Status != http.StatusOK {
			t.Fatalf("pull of %d-byte message: %v", size, r)
		}
		if !bytes.Equal(r.Body, bodies[i]) {
			t.Fatalf("%d-byte message came back with %d bytes, sha256 %x, want %x",
				size, len(r.Body), sha256.Sum256(r.Body), sha256.Sum256(bodies[i]))
		}
		if got, want := r.Header.Get("Content-Type"), "application/x-size-"+strconv.Itoa(size); got != want {
			t.Errorf("%d-byte message: content-type %q, want %q", size, got, want)
		}
		c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	}
	c.PullEmpty(q, "0")
}
