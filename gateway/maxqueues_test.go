package gateway_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Config.MaxQueues is exact on one gateway, however many requests create
// queues at once: of 40 concurrent pushes (and properties updates) into 40
// new queues with room for 10, exactly 10 succeed and the others fail with
// ErrTooManyQueues, leaving nothing behind (no properties of a refused
// queue); the same queue created by several requests at once takes one
// place.
func TestMaxQueuesExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	_, _, g := startCoreWith(t, gateway.Config{MaxQueues: 10})

	// One queue, ten requests at once: one place.
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if _, err := g.Messages().Push(ctx, "same", gateway.Message{Body: []byte("x")}); err != nil {
				t.Errorf("push into the same queue: %v", err)
			}
		})
	}
	wg.Wait()

	var mu sync.Mutex
	made, refused := 0, 0
	for i := range 40 {
		wg.Go(func() {
			q := fmt.Sprintf("q%02d", i)
			var err error
			if i%2 == 0 {
				_, err = g.Messages().Push(ctx, q, gateway.Message{Body: []byte("x")})
			} else {
				retry := 7
				err = g.Queues().UpdateProps(ctx, q, mapping.Props{Retry: &retry})
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				made++
			case errors.Is(err, gateway.ErrTooManyQueues):
				refused++
			default:
				t.Errorf("%s: %v", q, err)
			}
		})
	}
	wg.Wait()
	if made != 9 || refused != 31 || len(g.Queues().QueueNames()) != 10 {
		t.Fatalf("made %d, refused %d, %d queues exist; want 9, 31 and 10", made, refused, len(g.Queues().QueueNames()))
	}
	for _, q := range g.Queues().QueueNames() {
		if _, err := g.Messages().Push(ctx, q, gateway.Message{Body: []byte("y")}); err != nil {
			t.Errorf("push into existing %s: %v", q, err)
		}
	}
	for i := range 40 {
		q := fmt.Sprintf("q%02d", i)
		own, err := g.Queues().OwnProps(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		exists := false
		for _, n := range g.Queues().QueueNames() {
			exists = exists || n == q
		}
		if !exists && !own.IsZero() {
			t.Errorf("refused queue %s has properties %v", q, own)
		}
	}
	// A deleted queue makes room for one.
	if err := g.Queues().DeleteQueue(ctx, "same"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Messages().Push(ctx, "new", gateway.Message{Body: []byte("z")}); err != nil {
		t.Fatalf("push after a deletion: %v", err)
	}
	if _, err := g.Messages().Push(ctx, "newer", gateway.Message{Body: []byte("z")}); !errors.Is(err, gateway.ErrTooManyQueues) {
		t.Fatalf("push beyond the limit again: %v", err)
	}
}
