package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// jsTarget is raw JetStream, the engine under the gateway, used the way a
// queue needs it: per queue one WorkQueue stream (file storage, R1; R3 on
// the cluster of --cluster 3, its consumer too) and one
// durable pull consumer; push = sync Publish; pull = Fetch(1) + DoubleAck.
// Its streams are named BENCH_<queue>, so they never meet the gateway's.
type jsTarget struct {
	conns []*nats.Conn
	jss   []jetstream.JetStream
	next  atomic.Uint32 // round-robin over conns for new clients
	// replicas of the streams it creates (their consumers inherit it).
	replicas int

	mu        sync.RWMutex
	consumers map[string]jetstream.Consumer
}

const jsConsumerName = "bench"

func newJSTarget(url string, conns, replicas int) (*jsTarget, error) {
	t := &jsTarget{consumers: make(map[string]jetstream.Consumer), replicas: max(replicas, 1)}
	for i := range conns {
		nc, err := nats.Connect(url, nats.Name(fmt.Sprintf("lmq-bench-%d", i)),
			// The memory workload restarts a spawned gateway: come back fast.
			nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		if err != nil {
			_ = t.close()
			return nil, fmt.Errorf("jetstream target: connect %s: %w", url, err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			_ = t.close()
			return nil, fmt.Errorf("jetstream target: %w", err)
		}
		t.conns = append(t.conns, nc)
		t.jss = append(t.jss, js)
	}
	return t, nil
}

// waitConnected waits until every connection is up again (after a restart
// of the server).
func (t *jsTarget) waitConnected(ctx context.Context) error {
	for _, nc := range t.conns {
		for !nc.IsConnected() {
			if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
				return fmt.Errorf("waiting for NATS reconnect: %w", err)
			}
		}
	}
	return nil
}

func (t *jsTarget) name() string   { return tJS }
func (t *jsTarget) depth() int     { return 1 }
func (t *jsTarget) stateful() bool { return true }

func (t *jsTarget) close() error {
	for _, nc := range t.conns {
		nc.Close()
	}
	return nil
}

// streamName maps a bench queue name (letters, digits, '-') to a stream name.
func streamName(queue string) string { return "BENCH_" + strings.ReplaceAll(queue, ".", "_") }
func subject(queue string) string    { return "bench." + strings.ReplaceAll(queue, ".", "_") }

func (t *jsTarget) setup(ctx context.Context, queue string) error {
	js := t.jss[0]
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:      streamName(queue),
		Subjects:  []string{subject(queue)},
		Retention: jetstream.WorkQueuePolicy,
		Storage:   jetstream.FileStorage,
		Replicas:  t.replicas,
	})
	if err != nil {
		return fmt.Errorf("create stream for %s: %w", queue, err)
	}
	c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:   jsConsumerName,
		AckPolicy: jetstream.AckExplicitPolicy,
		// The gateway's default message timeout; bench messages are acked at once.
		AckWait: 30 * time.Second,
		// Enough for every bench client to hold one message in flight.
		MaxAckPending: 10000,
	})
	if err != nil {
		return fmt.Errorf("create consumer for %s: %w", queue, err)
	}
	t.mu.Lock()
	t.consumers[queue] = c
	t.mu.Unlock()
	return nil
}

func (t *jsTarget) remove(ctx context.Context, queue string) error {
	t.mu.Lock()
	delete(t.consumers, queue)
	t.mu.Unlock()
	err := t.jss[0].DeleteStream(ctx, streamName(queue))
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("delete stream for %s: %w", queue, err)
	}
	return nil
}

func (t *jsTarget) newClient(context.Context) (client, error) {
	i := int(t.next.Add(1)-1) % len(t.jss)
	return &jsClient{t: t, js: t.jss[i]}, nil
}

type jsClient struct {
	t  *jsTarget
	js jetstream.JetStream
}

func (c *jsClient) close() error { return nil }

func (c *jsClient) push(ctx context.Context, queue string, body []byte) error {
	if _, err := c.js.Publish(ctx, subject(queue), body); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

func (c *jsClient) pull(ctx context.Context, queue string, wait time.Duration) ([]byte, func(context.Context) error, error) {
	c.t.mu.RLock()
	cons, ok := c.t.consumers[queue]
	c.t.mu.RUnlock()
	if !ok {
		return nil, nil, fmt.Errorf("fetch: queue %s was not set up", queue)
	}
	var batch jetstream.MessageBatch
	var err error
	if wait <= 0 {
		batch, err = cons.FetchNoWait(1)
	} else {
		// FetchMaxWait, not a context deadline: the server then ends the
		// request and the client waits a further second for that answer.
		// With a context deadline the client gives up only a tenth of the
		// wait after the server, and on a loaded machine a message handed
		// out in that gap stays in flight, unseen, until AckWait.
		batch, err = cons.Fetch(1, jetstream.FetchMaxWait(wait))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("fetch: %w", err)
	}
	var msg jetstream.Msg
	msgs := batch.Messages()
recv:
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				break recv
			}
			msg = m
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("fetch: %w", ctx.Err())
		}
	}
	if msg == nil {
		if err := batch.Error(); err != nil && !isTimeout(err) {
			return nil, nil, fmt.Errorf("fetch: %w", err)
		}
		return nil, nil, nil
	}
	ack := func(ctx context.Context) error {
		if err := msg.DoubleAck(ctx); err != nil {
			return fmt.Errorf("ack: %w", err)
		}
		return nil
	}
	return msg.Data(), ack, nil
}

// isTimeout tells an empty long poll from a failure.
func isTimeout(err error) bool {
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, jetstream.ErrNoMessages)
}
