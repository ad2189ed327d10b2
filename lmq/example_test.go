package lmq_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/lmq-gateway/lmq-gateway/lmq"
)

// The queue runs inside the program: push, pull, ack.
func Example() {
	dir, err := os.MkdirTemp("", "lmq-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	qs, err := lmq.Open(ctx, lmq.Options{DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer qs.Close()

	if err := qs.Push(ctx, "jobs", []byte("resize photo 42"), nil); err != nil {
		log.Fatal(err)
	}
	d, err := qs.Pull(ctx, "jobs") // blocks until a message is there
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (queue %s, %d retries left)\n", d.Message.Body, d.Queue, d.RetryRemaining)
	if err := d.Ack(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: resize photo 42 (queue jobs, 2 retries left)
}

// openExample opens queues as Example does, with opt, on a new temporary
// data directory. cleanup closes them and removes the directory.
func openExample(ctx context.Context, opt lmq.Options) (qs *lmq.Queues, cleanup func()) {
	dir, err := os.MkdirTemp("", "lmq-example")
	if err != nil {
		log.Fatal(err)
	}
	opt.DataDir = dir
	if qs, err = lmq.Open(ctx, opt); err != nil {
		os.RemoveAll(dir)
		log.Fatal(err)
	}
	return qs, func() {
		qs.Close()
		os.RemoveAll(dir)
	}
}

// A producer and a consumer goroutine in one process. The consumer sleeps
// in Pull until a message arrives: no polling.
func Example_producerConsumer() {
	ctx := context.Background()
	qs, cleanup := openExample(ctx, lmq.Options{})
	defer cleanup()

	done := make(chan struct{})
	go func() { // consumer
		defer close(done)
		for range 3 {
			d, err := qs.Pull(ctx, "mail")
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("sending %s\n", d.Message.Body)
			if err := d.Ack(ctx); err != nil {
				log.Fatal(err)
			}
		}
	}()
	for _, to := range []string{"ann", "bob", "cid"} { // producer
		if err := qs.Push(ctx, "mail", []byte(to), nil); err != nil {
			log.Fatal(err)
		}
	}
	<-done
	// Output:
	// sending ann
	// sending bob
	// sending cid
}

// Properties work as over HTTP: a nack gives the message back at once and
// uses one of its retries; after retry+1 deliveries it is dropped.
func ExampleQueues_SetProps() {
	ctx := context.Background()
	qs, cleanup := openExample(ctx, lmq.Options{})
	defer cleanup()

	props, err := lmq.ParseProps(`{"retry": 1, "timeout": 60}`)
	if err != nil {
		log.Fatal(err)
	}
	if err := qs.SetProps(ctx, "flaky", props); err != nil {
		log.Fatal(err)
	}
	eff, err := qs.Props(ctx, "flaky")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("properties %s\n", eff.JSON())

	if err := qs.Push(ctx, "flaky", []byte("job"), nil); err != nil {
		log.Fatal(err)
	}
	for {
		// Without a message within a second, the queue is empty.
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		d, err := qs.Pull(pctx, "flaky")
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			fmt.Println("dropped after its last retry")
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("delivered, %d retries left; nack\n", d.RetryRemaining)
		if err := d.Nack(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// properties {"accum":0,"retry":1,"timeout":60}
	// delivered, 1 retries left; nack
	// delivered, 0 retries left; nack
	// dropped after its last retry
}

// The same process serves LMQ's HTTP API (and, with Options.RPC,
// MessagePack-RPC) for other programs, on listeners of its own.
func ExampleOptions_http() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	qs, cleanup := openExample(ctx, lmq.Options{HTTP: ln})
	defer cleanup()

	if err := qs.Push(ctx, "reports", []byte("weekly"), &lmq.PushOptions{ContentType: "text/plain"}); err != nil {
		log.Fatal(err)
	}
	resp, err := http.Get("http://" + qs.HTTPAddr().String() + "/messages/reports")
	if err != nil {
		log.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d %s %s\n", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	// The HTTP client's delivery is answered in-process (or over HTTP).
	err = qs.Reply(ctx, "reports", resp.Header.Get("X-Lmq-Message-Id"), lmq.Ack)
	fmt.Println("ack:", err)
	// Output:
	// 200 text/plain weekly
	// ack: <nil>
}
