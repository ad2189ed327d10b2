package e2e

// The fault tests of issue 7: a steady push/pull/ack load through real
// lmq-gateway processes while a NATS node, a gateway, or the whole single
// binary dies. Each prints its accounting (go test -v, or on failure) and
// requires that every message whose push was answered 200 is delivered and
// acked in the end: lost = 0. Brief errors while the fault lasts are allowed
// and counted; duplicates (a delivery after an ack was answered) are counted.
//
// Run exactly these with: go test ./e2e/... -run Fault -v

import (
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Timing of the fault tests. The queue timeout is short so that deliveries
// lost with a process come back soon: the consumer's AckWait backstop is the
// timeout plus 5 s (gateway/queues.go), and a waiting pull re-polls every 2 s.
const (
	faultTimeout = `{"timeout":1,"retry":1000}` // retry: redeliveries must never discard
	faultBefore  = 3 * time.Second              // load before the fault
	faultAfter   = 4 * time.Second              // load after it, pushes included
	// A kill -9 of a Raft leader is noticed by its followers only when their
	// election timer runs out (4 to 9 s in nats-server 2.15): the queue's
	// stream takes no writes until then (up to 10.5 s seen, when the killed
	// node also led the meta group).
	faultAfterNodeKill = 16 * time.Second
	faultDrain         = 30 * time.Second // bound of the final drain
	faultPushPause     = 15 * time.Millisecond
)

// faultLoad is the load every fault test runs: three producers and six
// consumers, every request to the next gateway, some deliveries extended and
// some nacked through another gateway than the one that delivered them.
func faultLoad(t *testing.T, queue string, targets ...string) *MixedLoad {
	return StartMixedLoad(t, LoadConfig{
		Queue:     queue,
		Targets:   targets,
		Producers: 3,
		Consumers: 6,
		PushPause: faultPushPause,
		Hold:      10 * time.Millisecond,
		ExtEvery:  7,
		NackEvery: 13,
	})
}

// prepareQueue sets the short timeout before the queue exists (the consumer's
// AckWait is taken from it at creation) and creates the queue with one
// pushed, pulled and acked message.
func prepareQueue(t *testing.T, c *Client, queue string) {
	t.Helper()
	c.PatchProps(queue, faultTimeout)
	c.Push(queue, []byte("warm-up"), "")
	r := c.MustPull(queue, "5", "warm-up")
	c.ExpectReply(http.StatusNoContent, queue, r.ID(), "ack")
}

// runFault runs the load, calls fault after faultBefore, goes on for after,
// drains, and checks and prints the accounting.
func runFault(t *testing.T, name string, load *MixedLoad, js jetstream.JetStream, queue string, after time.Duration, fault func()) {
	t.Helper()
	start := time.Now()
	timeline := load.Timeline(500 * time.Millisecond)
	time.Sleep(faultBefore)
	before := load.Ledger().Totals()
	faultAt := time.Now()
	fault()
	t.Logf("%s: fault injected after %v (took %v); before it: %v", name, faultAt.Sub(start).Round(time.Millisecond), time.Since(faultAt).Round(time.Millisecond), before)
	time.Sleep(after)
	during := load.Ledger().Totals()
	drainStart := time.Now()
	drained := load.Drain(faultDrain, QueueEmpty(js, queue))
	tot := load.Ledger().Totals()
	t.Logf("%s accounting: %v", name, tot)
	t.Logf("%s: pushed/acked per 500ms: %s", name, timeline())
	t.Logf("%s: drained in %v, whole test %v", name, time.Since(drainStart).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if during.Pushed <= before.Pushed || during.Acked <= before.Acked {
		t.Errorf("%s: the load did not go on after the fault: before %v; %v later: %v", name, before, after, during)
	}
	if tot.Pushed == 0 {
		t.Fatalf("%s: nothing was pushed", name)
	}
	if !drained {
		t.Errorf("%s: not drained within %v (stream empty: %v)", name, faultDrain, QueueEmpty(js, queue)())
	}
	if tot.Lost != 0 {
		t.Errorf("%s: %d messages answered 200 at push were never acked", name, tot.Lost)
	}
}

// TestFaultNATSNodeKill: three lmq-gateway binaries form an embedded
// JetStream cluster with R3 queues; the node leading the queue's stream is
// killed with SIGKILL (its NATS server and its gateway with it) under load
// spread over all three. The other two elect a new leader and go on; the
// deliveries held by the dead gateway come back after their timeout.
func TestFaultNATSNodeKill(t *testing.T) {
	nodes := StartEmbeddedCluster(t, 3, "--replicas", "3")
	const q = "fault-node"
	prepareQueue(t, nodes[0].Client(t), q)
	urls := nodes[0].NATSURL + "," + nodes[1].NATSURL + "," + nodes[2].NATSURL
	js := JetStreamOf(t, urls)
	info := QueueStream(t, js, q)
	if info.Config.Replicas != 3 || info.Cluster == nil {
		t.Fatalf("queue stream: replicas %d, cluster %+v; want an R3 stream", info.Config.Replicas, info.Cluster)
	}
	victim := -1
	for i := range nodes {
		if info.Cluster.Leader == nodeName(i) {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("stream leader %q is none of the nodes", info.Cluster.Leader)
	}
	load := faultLoad(t, q, nodes[0].HTTP, nodes[1].HTTP, nodes[2].HTTP)
	runFault(t, "TestFaultNATSNodeKill", load, js, q, faultAfterNodeKill, func() {
		nodes[victim].Kill()
		t.Logf("killed %s, the stream leader", nodeName(victim))
	})
	after := QueueStream(t, js, q)
	t.Logf("stream leader now %s (was %s)", after.Cluster.Leader, info.Cluster.Leader)
	if after.Cluster.Leader == info.Cluster.Leader {
		t.Errorf("the stream leader is still the killed node %s", info.Cluster.Leader)
	}
}

func nodeName(i int) string { return "n" + string(rune('0'+i)) }

// TestFaultGatewayKill: two gateways on one NATS server; one is killed with
// SIGKILL under load spread over both. Replies to its deliveries answer 404
// (relayed to nobody) and those messages come back after their timeout
// through the other gateway.
func TestFaultGatewayKill(t *testing.T) {
	natsURL := StartNATS(t)
	a := StartWithNATS(t, natsURL)
	b := StartWithNATS(t, natsURL)
	const q = "fault-gateway"
	prepareQueue(t, a.Client(t), q)
	js := JetStreamOf(t, natsURL)
	load := faultLoad(t, q, a.HTTP, b.HTTP)
	runFault(t, "TestFaultGatewayKill", load, js, q, faultAfter, b.Kill)
}

// TestFaultRestartSingle: the single-node binary (embedded NATS) is killed
// with SIGKILL under load and started again on the same data; clients see
// errors while it is down, and nothing that was answered 200 is lost.
func TestFaultRestartSingle(t *testing.T) {
	gw := rpcStart(t) // Start, with the data directory removed after the shutdown
	const q = "fault-restart"
	prepareQueue(t, gw.Client(t), q)
	// The test's own connection reconnects to the restarted server.
	js := JetStreamOf(t, gw.NATSURL)
	load := faultLoad(t, q, gw.HTTP)
	runFault(t, "TestFaultRestartSingle", load, js, q, faultAfter, func() {
		gw.Kill()
		gw.Restart()
	})
}
