// Command embedded is a complete program using lmq-gateway's Go API
// (package lmq) from the outside: it opens a queue store in a temporary
// directory, pushes with every push option (priority, ordered group, delay,
// ttl, idempotency key, content type), pulls, acks, and exits.
//
//	go run ./examples/embedded
//
// It imports only package lmq, as a program in another module would
// (examples/README.md says how to require this module before it is
// published). It checks what it prints and exits 1 when the queue behaves
// otherwise.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/lmq-gateway/lmq-gateway/lmq"
)

func main() {
	log.SetFlags(0)
	if err := run(); err != nil {
		log.Fatal("embedded: ", err)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	dir, err := os.MkdirTemp("", "lmq-embedded")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	qs, err := lmq.Open(ctx, lmq.Options{DataDir: dir})
	if err != nil {
		return err
	}
	defer qs.Close() // gives back whatever is still delivered

	steps := []struct {
		name string
		run  func(context.Context, *lmq.Queues) error
	}{
		{"priority", priority},
		{"group", group},
		{"delay", delay},
		{"ttl", ttl},
		{"idempotency key", idempotency},
	}
	for _, s := range steps {
		if err := s.run(ctx, qs); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return qs.Close()
}

// priority: higher priorities are served first (0 to 9; nil is the queue's
// priority property, default 0).
func priority(ctx context.Context, qs *lmq.Queues) error {
	low, high := 1, 9
	if err := qs.Push(ctx, "jobs", []byte("resize photo 41"), &lmq.PushOptions{Priority: &low}); err != nil {
		return err
	}
	if err := qs.Push(ctx, "jobs", []byte(`{"alert":"disk full"}`), &lmq.PushOptions{
		Priority: &high, ContentType: "application/json",
	}); err != nil {
		return err
	}
	for _, want := range []string{`{"alert":"disk full"}`, "resize photo 41"} {
		d, err := qs.Pull(ctx, "jobs") // blocks until a message is there
		if err != nil {
			return err
		}
		fmt.Printf("jobs: %s (%s, priority %d, %d retries left)\n",
			d.Message.Body, d.Message.ContentType, d.Priority, d.RetryRemaining)
		if string(d.Message.Body) != want {
			return fmt.Errorf("pulled %q, want %q", d.Message.Body, want)
		}
		if err := d.Ack(ctx); err != nil {
			return err
		}
	}
	return nil
}

// group: a group's messages are handed out one at a time, in push order;
// the next one waits until the previous delivery is answered.
func group(ctx context.Context, qs *lmq.Queues) error {
	for _, b := range []string{"cart 7: add book", "cart 7: checkout"} {
		if err := qs.Push(ctx, "carts", []byte(b), &lmq.PushOptions{Group: "cart-7"}); err != nil {
			return err
		}
	}
	first, err := qs.Pull(ctx, "carts")
	if err != nil {
		return err
	}
	fmt.Printf("carts: %s (group %s)\n", first.Message.Body, first.Group)
	if d, err := pullWithin(ctx, qs, "carts", 300*time.Millisecond); d != nil || err != nil {
		return fmt.Errorf("second message of the group handed out while the first is in flight (%v)", err)
	}
	fmt.Println("carts: nothing else while it is in flight")
	if err := first.Ack(ctx); err != nil {
		return err
	}
	second, err := qs.Pull(ctx, "carts")
	if err != nil {
		return err
	}
	fmt.Printf("carts: %s (group %s)\n", second.Message.Body, second.Group)
	if string(second.Message.Body) != "cart 7: checkout" {
		return fmt.Errorf("pulled %q second", second.Message.Body)
	}
	return second.Ack(ctx)
}

// delay: the message stays invisible for a while.
func delay(ctx context.Context, qs *lmq.Queues) error {
	const wait = time.Second
	start := time.Now()
	if err := qs.Push(ctx, "reminders", []byte("call back"), &lmq.PushOptions{Delay: wait}); err != nil {
		return err
	}
	d, err := qs.Pull(ctx, "reminders") // sleeps until the delay has passed
	if err != nil {
		return err
	}
	took := time.Since(start)
	fmt.Printf("reminders: %s (after the %v delay)\n", d.Message.Body, wait)
	if took < wait-100*time.Millisecond {
		return fmt.Errorf("delivered after %v, before its %v delay", took, wait)
	}
	return d.Ack(ctx)
}

// ttl: a message nobody pulled within its ttl expires (this overrides the
// queue's ttl property).
func ttl(ctx context.Context, qs *lmq.Queues) error {
	if err := qs.Push(ctx, "quotes", []byte("EUR/USD 1.09"), &lmq.PushOptions{TTL: 200 * time.Millisecond}); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	d, err := pullWithin(ctx, qs, "quotes", 500*time.Millisecond)
	if err != nil {
		return err
	}
	if d != nil {
		return fmt.Errorf("pulled %q past its ttl", d.Message.Body)
	}
	fmt.Println("quotes: expired after its 200ms ttl, never delivered")
	return nil
}

// idempotency: a push retried with the same key (say after ErrUnknown)
// within five minutes is stored once.
func idempotency(ctx context.Context, qs *lmq.Queues) error {
	opts := &lmq.PushOptions{IdempotencyKey: "order-17"}
	for range 2 {
		if err := qs.Push(ctx, "orders", []byte("order 17"), opts); err != nil {
			return err
		}
	}
	d, err := qs.Pull(ctx, "orders")
	if err != nil {
		return err
	}
	if err := d.Ack(ctx); err != nil {
		return err
	}
	again, err := pullWithin(ctx, qs, "orders", 300*time.Millisecond)
	if err != nil {
		return err
	}
	if again != nil {
		return errors.New("the retried push was stored twice")
	}
	fmt.Printf("orders: %s, pushed twice with key %s, stored once\n", d.Message.Body, opts.IdempotencyKey)
	return nil
}

// pullWithin pulls from queue if a message comes within wait; nil, nil
// when none does.
func pullWithin(ctx context.Context, qs *lmq.Queues, queue string, wait time.Duration) (*lmq.Delivery, error) {
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	d, err := qs.Pull(pctx, queue)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, nil
	}
	return d, err
}
