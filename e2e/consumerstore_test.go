package e2e

// Tests of the queues' consumer storage (--consumer-storage, gateway
// package doc "Consumer storage"): consumers are made with memory storage
// by default and file storage on request, consumers that exist with the
// other storage are used as they are, and a restart of NATS with a delivery
// in flight loses no message.

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// consumerStorage returns whether the named consumer of queue's stream
// keeps its state in memory, and its AckWait.
func consumerStorage(t *testing.T, js jetstream.JetStream, queue, consumer string) (memory bool, ackWait time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, mapping.StreamName(queue), consumer)
	if err != nil {
		t.Fatalf("consumer %s of queue %q: %v", consumer, queue, err)
	}
	cfg := c.CachedInfo().Config
	return cfg.MemoryStorage, cfg.AckWait
}

// TestConsumerStorage: a queue's consumer and its priority levels' consumers
// are made with memory storage by default and with --consumer-storage
// memory, with file storage with --consumer-storage file.
func TestConsumerStorage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		args   []string
		memory bool
	}{
		{"default", nil, true},
		{"memory", []string{"--consumer-storage", "memory"}, true},
		{"file", []string{"--consumer-storage", "file"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gw := Start(t, tc.args...)
			c := gw.Client(t)
			js := JetStreamOf(t, gw.NATSURL)
			q := "store/" + tc.name
			c.Push(q, []byte("plain"), "")
			c.Expect(http.StatusOK, http.MethodPost, "/messages/"+Q(q)+"?priority=3", []byte("high"))
			for _, body := range []string{"high", "plain"} {
				r := c.MustPull(q, msgWait, body)
				c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
			}
			for _, name := range []string{mapping.ConsumerName(q), mapping.PriorityConsumerName(q, 3)} {
				if mem, _ := consumerStorage(t, js, q, name); mem != tc.memory {
					t.Errorf("consumer %s: memory storage %v, want %v", name, mem, tc.memory)
				}
			}
		})
	}
}

// TestConsumerStorageExistingBound: two gateways on one NATS server, one
// with memory consumers (the default) and one with --consumer-storage file,
// serve queues whose consumers exist with the other storage: one made by a
// NATS program (or an older version) with file storage, and one made by the
// memory gateway. Push, pull, nack, ext (which raises the consumer's
// AckWait: an update of the consumer) and ack work through both, and the
// consumers keep the storage they had.
func TestConsumerStorageExistingBound(t *testing.T) {
	t.Parallel()
	natsURL := StartNATS(t)
	mem := StartWithNATS(t, natsURL)
	file := StartWithNATS(t, natsURL, "--consumer-storage", "file")
	cm, cf := mem.Client(t), file.Client(t)
	js := JetStreamOf(t, natsURL)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // reached only on failure
	defer cancel()

	// serve pushes three messages through one gateway and takes them through
	// both: ack, nack and pull again, ext after a longer timeout, ack.
	serve := func(q string, first, second *Client) {
		t.Helper()
		for _, b := range []string{"one", "two", "three"} {
			first.Push(q, []byte(b), "")
		}
		r := first.MustPull(q, msgWait, "one")
		first.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
		r = second.MustPull(q, msgWait, "two")
		second.ExpectReply(http.StatusNoContent, q, r.ID(), "nack")
		r = second.MustPull(q, msgWait, "three")
		// A longer timeout raises the consumer's AckWait on the next ext.
		second.PatchProps(q, `{"timeout":120}`)
		second.ExpectReply(http.StatusNoContent, q, r.ID(), "ext")
		second.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
		r = first.MustPull(q, msgWait, "two")
		first.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
		first.PullEmpty(q, "0")
	}

	// A file consumer made with the settings of the version before memory
	// storage (and of the README's NATS-native section), before any gateway
	// pulled from the queue.
	const old = "bound/old"
	cm.Push(old, []byte("zero"), "")
	n, err := mapping.NativeNames(old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, n.Stream, jetstream.ConsumerConfig{
		Durable:           n.Consumer,
		Description:       `lmq queue "` + old + `"`,
		FilterSubject:     n.Subject,
		AckPolicy:         jetstream.AckExplicitPolicy,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckWait:           35 * time.Second,
		MaxDeliver:        -1,
		MaxAckPending:     -1,
		InactiveThreshold: mapping.ConsumerInactive,
	}); err != nil {
		t.Fatalf("file consumer: %v", err)
	}
	r := cm.MustPull(old, msgWait, "zero")
	cm.ExpectReply(http.StatusNoContent, old, r.ID(), "ack")
	serve(old, cm, cf)

	// A memory consumer made by the memory gateway, then served by the file
	// gateway first.
	const made = "bound/made"
	cm.Push(made, []byte("zero"), "")
	r = cm.MustPull(made, msgWait, "zero")
	cm.ExpectReply(http.StatusNoContent, made, r.ID(), "ack")
	serve(made, cf, cm)

	for _, tc := range []struct {
		queue  string
		memory bool
	}{{old, false}, {made, true}} {
		memory, ackWait := consumerStorage(t, js, tc.queue, mapping.ConsumerName(tc.queue))
		if memory != tc.memory {
			t.Errorf("queue %q: consumer memory storage %v, want %v (kept as it was)", tc.queue, memory, tc.memory)
		}
		if ackWait < 120*time.Second {
			t.Errorf("queue %q: consumer AckWait %v, want it raised above the timeout of 120 s", tc.queue, ackWait)
		}
	}
	for _, g := range []*Gateway{mem, file} {
		if out := g.Output(); strings.Contains(out, "consumer failed") || strings.Contains(out, "level=ERROR") {
			t.Errorf("gateway %v logged a failure:\n%s", g.args, out)
		}
	}
}

// TestConsumerStorageRestart: NATS restarts with a delivery in flight on a
// queue whose timeout is an hour, so that neither the gateway's timer nor
// JetStream's AckWait backstop can bring the message back during the test.
// A memory consumer's state is gone with the server: the gateway makes the
// consumer again, the message in flight is delivered again at once, with
// its delivery count started anew, the others follow in order, acks after
// the restart work, and nothing acked before comes back.
//   - embedded-kill: the single binary (embedded NATS) is killed with
//     SIGKILL and started again on its data directory (a file consumer may
//     also have lost its latest state there: this case holds for both);
//   - embedded-stop: the same with SIGTERM, where the gateway releases the
//     delivery before it stops (a copy at the tail);
//   - external: an external nats-server is shut down and started again on
//     its data directory while the gateway keeps running; a file consumer
//     would keep the delivery pending until its timeout.
func TestConsumerStorageRestart(t *testing.T) {
	t.Parallel()
	const q = "restart/inflight"
	// fill pushes four messages and leaves "acked" acked and "in-flight" in
	// flight; it returns the delivery of "in-flight".
	fill := func(c *Client) *Response {
		t.Helper()
		c.PatchProps(q, `{"timeout":3600,"retry":5}`)
		for _, b := range []string{"acked", "in-flight", "waiting-1", "waiting-2"} {
			c.Push(q, []byte(b), "")
		}
		r := c.MustPull(q, msgWait, "acked")
		c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
		return c.MustPull(q, msgWait, "in-flight")
	}
	// after pulls the three messages left after the restart, in the order
	// given, and acks them; "in-flight" must have the retries given left.
	after := func(t *testing.T, c *Client, js jetstream.JetStream, order []string, retry int) {
		t.Helper()
		for _, b := range order {
			r := c.MustPull(q, msgWait, b)
			if b == "in-flight" && r.Retry() != retry {
				t.Errorf("in-flight after the restart: x-lmq-retry-remaining %d, want %d", r.Retry(), retry)
			}
			c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
		}
		c.PullEmpty(q, "0")
		if !testwait.Until(20*time.Second, QueueEmpty(js, q)) {
			t.Errorf("queue %q: messages left in its stream after every ack", q)
		}
	}
	// The consumer lost with the server hands the message in flight out
	// again first, with its delivery count started anew: the retries left
	// are those of its first delivery.
	lost := []string{"in-flight", "waiting-1", "waiting-2"}

	for _, kill := range []bool{true, false} {
		name := "embedded-stop"
		if kill {
			name = "embedded-kill"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			gw := Start(t)
			c := gw.Client(t)
			inflight := fill(c)
			if kill {
				gw.Kill()
			} else {
				gw.Stop()
			}
			gw.Restart()
			js := JetStreamOf(t, gw.NATSURL)
			// The delivery id of the stopped process is void.
			c.ExpectReply(http.StatusNotFound, q, inflight.ID(), "ack")
			if kill {
				after(t, c, js, lost, inflight.Retry())
			} else {
				// A graceful stop released the delivery: a copy at the
				// tail, not counting the delivery (ReleaseAll).
				after(t, c, js, []string{"waiting-1", "waiting-2", "in-flight"}, inflight.Retry())
			}
		})
	}

	t.Run("external", func(t *testing.T) {
		t.Parallel()
		ns, opts := startNATSServer(t)
		gw := StartWithNATS(t, ns.ClientURL())
		c := gw.Client(t)
		js := JetStreamOf(t, ns.ClientURL())
		inflight := fill(c)
		ns.Shutdown()
		ns.WaitForShutdown()
		RestartNATS(t, ns, opts)
		after(t, c, js, lost, inflight.Retry())
		// The first delivery, still held by its client, was superseded by
		// the one after the restart, which was acked: its ack finds nothing
		// to do. (Not asserted: JetStream answers an ack of a message gone.)
		t.Logf("ack of the delivery from before the restart: %d", c.Reply(q, inflight.ID(), "ack"))
	})
}

// clusterPullWait is the long-poll wait, in seconds, of the cluster tests'
// pulls: a pull may have to outlast a leader election, and elections on a
// loaded machine take seconds.
const clusterPullWait = "60"

// TestConsumerStorageClusterNode: in a three-node embedded cluster with
// --replicas 3, a queue's memory consumer is a replicated consumer of the R3
// shard stream. The node leading it is killed with SIGKILL, messages are
// acked meanwhile, the node is started again (its consumer state is gone
// with the process and comes back from the other replicas), and then the
// third node is killed, so that the restarted node's state is needed for a
// quorum. Through it all, a delivery held by the gateway on the node never
// killed stays in flight (not handed out again), no acked message comes
// back, and every other message is delivered once.
func TestConsumerStorageClusterNode(t *testing.T) {
	heavy(t, "a cluster")
	t.Parallel()
	nodes := StartEmbeddedCluster(t, 3, "--replicas", "3")
	const q = "cluster-mem"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The consumer is made by the first pull; its leader picks the victim.
	c0 := nodes[0].Client(t)
	c0.PatchProps(q, `{"timeout":3600}`)
	c0.Push(q, []byte("warm-up"), "")
	const total = 12
	body := func(i int) string { return "m" + string(rune('a'+i)) }
	for i := range total {
		c0.Push(q, []byte(body(i)), "")
	}
	r := c0.MustPull(q, clusterPullWait, "warm-up")
	c0.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	js := JetStreamOf(t, nodes[0].NATSURL)
	info := consumerInfo(t, js, q)
	if !info.Config.MemoryStorage || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("queue consumer: memory storage %v, cluster %+v; want a memory consumer with 2 replicas besides its leader", info.Config.MemoryStorage, info.Cluster)
	}
	first := -1
	for i := range nodes {
		if nodeName(i) == info.Cluster.Leader {
			first = i
		}
	}
	if first < 0 {
		t.Fatalf("consumer leader %q is none of the nodes", info.Cluster.Leader)
	}
	// The clients' node is one that is never killed, the third the other.
	keep := (first + 1) % 3
	third := 3 - first - keep
	c := nodes[keep].Client(t)
	js = JetStreamOf(t, nodes[keep].NATSURL)
	held := c.MustPull(q, clusterPullWait, body(0))
	next := 1
	pullAck := func(n int) {
		t.Helper()
		for range n {
			r := c.MustPull(q, clusterPullWait, body(next))
			c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
			next++
		}
	}
	pullAck(2)

	nodes[first].Kill()
	t.Logf("killed %s, the consumer leader", nodeName(first))
	pullAck(3)
	nodes[first].Restart()
	// Wait until the restarted node's replica of the consumer is current.
	if !testwait.Until(2*time.Minute, func() bool {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		cons, err := js.Consumer(cctx, mapping.StreamName(q), mapping.ConsumerName(q))
		if err != nil {
			return false
		}
		cl := cons.CachedInfo().Cluster
		if cl == nil || cl.Leader == "" {
			return false
		}
		seen := map[string]bool{cl.Leader: true}
		for _, r := range cl.Replicas {
			if r.Current && !r.Offline {
				seen[r.Name] = true
			}
		}
		return len(seen) == 3
	}) {
		t.Fatalf("the consumer's replica on the restarted node %s did not become current", nodeName(first))
	}
	pullAck(2)
	nodes[third].Kill()
	t.Logf("restarted %s, killed %s", nodeName(first), nodeName(third))
	pullAck(total - next)
	// Only the held message is left, and it is still in flight.
	c.PullEmpty(q, "2")
	c.ExpectReply(http.StatusNoContent, q, held.ID(), "ack")
	if !testwait.Until(time.Minute, QueueEmpty(js, q)) {
		t.Errorf("queue %q: messages left in its stream after every ack", q)
	}
}

// TestConsumerStorageClusterRestart: every node of a three-node embedded
// cluster (--replicas 3) is killed with SIGKILL at once and the cluster
// started again. A memory consumer's state is gone from all three replicas
// then, like a single server's after its restart: the delivery in flight is
// handed out again at once, and every message still queued once. An ack
// answered 204 (once the stream has removed its message, which JetStream
// does just after the consumer's replicas agreed on the ack) stays done:
// the message is gone from the file-backed R3 stream, not only from the
// consumer.
func TestConsumerStorageClusterRestart(t *testing.T) {
	heavy(t, "a cluster restarted")
	t.Parallel()
	nodes := StartEmbeddedCluster(t, 3, "--replicas", "3")
	const q = "cluster-restart"
	c := nodes[0].Client(t)
	c.PatchProps(q, `{"timeout":3600,"retry":5}`)
	for _, b := range []string{"acked-1", "acked-2", "in-flight", "waiting-1", "waiting-2"} {
		c.Push(q, []byte(b), "")
	}
	for _, b := range []string{"acked-1", "acked-2"} {
		r := c.MustPull(q, clusterPullWait, b)
		c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	}
	inflight := c.MustPull(q, clusterPullWait, "in-flight")
	js := JetStreamOf(t, nodes[0].NATSURL)
	// The stream removes an acked message after the ack is answered; wait
	// for that (three messages left), so that the test is about the
	// cluster's state, not about that moment.
	if !testwait.Until(time.Minute, QueueHolds(js, q, 3)) {
		t.Fatal("the acked messages were not removed from the stream")
	}

	for _, n := range nodes {
		n.Kill()
	}
	t.Log("killed every node")
	restartCluster(t, nodes)
	c = nodes[1].Client(t)
	c.ExpectReply(http.StatusNotFound, q, inflight.ID(), "ack")
	for _, b := range []string{"in-flight", "waiting-1", "waiting-2"} {
		r := c.MustPull(q, clusterPullWait, b)
		if b == "in-flight" && r.Retry() != inflight.Retry() {
			t.Errorf("in-flight after the restart: x-lmq-retry-remaining %d, want %d", r.Retry(), inflight.Retry())
		}
		c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
	}
	c.PullEmpty(q, "1")
	js = JetStreamOf(t, nodes[1].NATSURL)
	if !testwait.Until(time.Minute, QueueEmpty(js, q)) {
		t.Errorf("queue %q: messages left in its stream after every ack", q)
	}
}
