package e2e

// Scale-out (issue 7): an embedded three-node JetStream cluster of
// lmq-gateway binaries, several gateways on one external NATS cluster, and
// the connection settings of an external deployment (TLS, credentials).
// Every API call of one client goes to the next gateway, so each reply is
// relayed from a gateway that did not deliver the message to the one that did.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testpki"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// clusterSettle bounds the waits of the cluster tests for the cluster to
// take writes again, or for a change to show everywhere, after a node was
// lost or came back. It is a safety net, not a budget: how long recovery
// took is logged (roundTrip's result), never asserted, and a quiet machine
// needs a fraction of it (an election: up to ~10 s seen).
const clusterSettle = 2 * time.Minute

// rr hands out the clients of several gateways in turn.
type rr struct {
	cs []*Client
	i  int
}

func newRR(t *testing.T, gws ...*Gateway) *rr {
	r := &rr{}
	for _, g := range gws {
		r.cs = append(r.cs, g.Client(t))
	}
	return r
}

// next is the client of the next gateway.
func (r *rr) next() *Client {
	c := r.cs[r.i%len(r.cs)]
	r.i++
	return c
}

// crossGatewayAPI walks the whole LMQ HTTP API with every request going to
// the next gateway of r: properties, default list, push, pull, ack/nack/ext
// relayed to the delivering gateway, stale ids, pull-any woken by a push
// elsewhere, push-all, queue deletion.
//
// settle bounds how long a change made through one gateway may take to show
// on the others: a safety net (clusterSettle), not a budget. Normally a
// moment; after a NATS node was lost, about 20 s on a quiet machine: a
// gateway whose properties watch had its (R1, ordered) consumer on the lost
// node only notices after two missed 5 s heartbeats and then re-creates it
// (nats.go's ordered consumer).
func crossGatewayAPI(t *testing.T, r *rr, prefix string, settle time.Duration) {
	q := prefix + "-walk"
	dq := prefix + "-defaults"
	jsonCT := []string{"Content-Type", "application/json"}
	// Created and used once first, with retries: an R3 stream created while
	// a node of the cluster is down may take seconds to be created and to
	// take writes (503 meanwhile), which is not what this walk is about.
	roundTrip(t, r, q, "probe", settle)
	roundTrip(t, r, dq, "probe", settle)

	r.next().PatchProps(q, `{"retry":5,"timeout":10}`)
	testwait.WithinDetail(t, settle, "queue properties on every gateway", func() (bool, string) {
		for i, c := range r.cs {
			if got := c.Props(q); got != `{"accum":0,"retry":5,"timeout":10}` {
				return false, fmt.Sprintf("gateway %d: %s", i, got)
			}
		}
		return true, ""
	})

	// ext and ack go to other gateways than the one that delivered.
	r.next().Push(q, []byte("m1"), "text/plain")
	m := r.next().MustPull(q, "5", "m1")
	r.next().ExpectReply(http.StatusNoContent, q, m.ID(), "ext")
	r.next().ExpectReply(http.StatusNoContent, q, m.ID(), "ack")
	for range r.cs {
		r.next().ExpectReply(http.StatusNotFound, q, m.ID(), "ack")
	}

	// nack relayed; the old id is dead everywhere; one retry is used.
	r.next().Push(q, []byte("m2"), "")
	m = r.next().MustPull(q, "5", "m2")
	if m.Retry() != 5 {
		t.Errorf("first delivery: retry-remaining %d, want 5", m.Retry())
	}
	r.next().ExpectReply(http.StatusNoContent, q, m.ID(), "nack")
	for range r.cs {
		r.next().ExpectReply(http.StatusNotFound, q, m.ID(), "ext")
	}
	m2 := r.next().MustPull(q, "5", "m2")
	if m2.Retry() != 4 || m2.ID() == m.ID() {
		t.Errorf("after a relayed nack: retry-remaining %d (want 4), id %s (old %s)", m2.Retry(), m2.ID(), m.ID())
	}
	r.next().ExpectReply(http.StatusNoContent, q, m2.ID(), "ack")
	r.next().PullEmpty(q, "0")

	// A long-poll on one gateway is woken by a push through another.
	c := r.next()
	got := make(chan *Response, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := c.Send(ctx, http.MethodGet, "/messages?qre="+Q("^"+prefix+"-w")+"&t=8", nil)
		if err != nil {
			resp = &Response{Status: -1, Body: []byte(err.Error())}
		}
		got <- resp
	}()
	awaitWaitingPulls(t, c, 1)
	r.next().Push(q, []byte("woken"), "")
	resp := <-got
	ExpectMessage(t, resp, q, "woken")
	r.next().ExpectReply(http.StatusNoContent, q, resp.ID(), "ack")

	// Push-all reaches the queue through any gateway.
	pr := r.next().Expect(http.StatusOK, http.MethodPost, "/messages?qre="+Q("^"+prefix+"-walk$"), []byte("to-all"))
	var res map[string]map[string]string
	if err := json.Unmarshal(pr.Body, &res); err != nil || res[q]["accum"] != "no" {
		t.Errorf("push-all answer %s (%v), want %s in it", pr.Body, err, q)
	}
	m = r.next().MustPull(q, "5", "to-all")
	r.next().ExpectReply(http.StatusNoContent, q, m.ID(), "ack")

	// The default list, set through one gateway, applies on all.
	list := `[["^` + prefix + `-def",{"retry":7}]]`
	r.next().Expect(http.StatusNoContent, http.MethodPut, "/properties", []byte(list), jsonCT...)
	testwait.WithinDetail(t, settle, "default list on every gateway", func() (bool, string) {
		for _, c := range r.cs {
			got := string(c.Expect(http.StatusOK, http.MethodGet, "/properties", nil).Body)
			if got != list {
				return false, got
			}
			if p := c.Props(dq); p != `{"accum":0,"retry":7,"timeout":30}` {
				return false, p
			}
		}
		return true, ""
	})
	r.next().Expect(http.StatusNoContent, http.MethodDelete, "/properties", nil)
	r.next().Expect(http.StatusNoContent, http.MethodDelete, "/properties/"+Q(q), nil)
	testwait.WithinDetail(t, settle, "properties reset on every gateway", func() (bool, string) {
		for _, c := range r.cs {
			if got := c.Props(q); got != `{"accum":0,"retry":2,"timeout":30}` {
				return false, got
			}
			if got := string(c.Expect(http.StatusOK, http.MethodGet, "/properties", nil).Body); got != `[]` {
				return false, got
			}
		}
		return true, ""
	})

	// Deleted through one gateway, gone for all.
	r.next().Push(q, []byte("doomed"), "")
	r.next().Expect(http.StatusNoContent, http.MethodDelete, "/queues/"+Q(q), nil)
	r.next().Expect(http.StatusNotFound, http.MethodDelete, "/queues/"+Q(q), nil)
	testwait.WithinDetail(t, settle, "queue list without the deleted queue", func() (bool, string) {
		for _, c := range r.cs {
			// GET /queues asks JetStream about every queue: while one of
			// their streams elects a leader it may answer 503.
			resp := c.Do(http.MethodGet, "/queues", nil)
			if resp.Status != http.StatusOK || strings.Contains(string(resp.Body), `"`+q+`"`) {
				return false, resp.String()
			}
		}
		return true, ""
	})
	createQueue(t, r, q, settle) // a pull creates it again, empty
}

// createQueue creates queue by pulling from it (t=0) through the next
// gateway until the answer is 204, for up to d.
func createQueue(t *testing.T, r *rr, queue string, d time.Duration) {
	t.Helper()
	var last *Response
	if !testwait.Until(d, func() bool {
		last = r.next().Pull(queue, "0")
		return last.Status == http.StatusNoContent
	}) {
		t.Fatalf("create queue %q: last answer %v", queue, last)
	}
}

// crossGatewayRPC: over MessagePack-RPC as well, every call may go to
// another gateway; done, retain and release are relayed to the gateway that
// delivered.
func crossGatewayRPC(t *testing.T, gws ...*Gateway) {
	t.Helper()
	cs := make([]*rpcClient, len(gws))
	for i, g := range gws {
		cs[i] = dialRPC(t, g.RPCAddr)
	}
	n := 0
	next := func() *rpcClient {
		c := cs[n%len(cs)]
		n++
		return c
	}
	const q = "rpc-cross"
	next().MustOK("push", q, "hello")
	m := next().MustPull("pull", q, 5)
	next().MustOK("retain", q, m.ID)
	next().MustOK("release", q, m.ID)
	m2 := next().MustPull("pull", q, 5)
	if m2.ID == m.ID || m2.Retry != 1 || m2.Content != "hello" {
		t.Errorf("after a relayed release: %+v, want a new id, retry 1, hello", m2)
	}
	for range cs {
		next().MustFail("done", q, m.ID)
	}
	next().MustOK("done", q, m2.ID)
	for range cs {
		next().MustFail("retain", q, m2.ID)
	}
	next().MustEmpty("pull", q, 0)
}

// roundTrip pushes body through one client and pulls and acks it through
// the next ones, retrying while a cluster elects leaders (up to d); it
// reports how long it took until the push was accepted.
func roundTrip(t *testing.T, r *rr, queue, body string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last *Response
	if !testwait.Until(d, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := r.next().Send(ctx, http.MethodPost, "/messages/"+Q(queue), []byte(body))
		if err != nil {
			last = &Response{Status: -1, Body: []byte(err.Error())}
			return false
		}
		last = resp
		return resp.Status == http.StatusOK
	}) {
		t.Fatalf("push %q to %q: not accepted within %v; last answer %v", body, queue, d, last)
	}
	took := time.Since(start)
	var m *Response
	if !testwait.Until(d, func() bool {
		m = r.next().Pull(queue, "2")
		return m.Status == http.StatusOK
	}) {
		t.Fatalf("pull %q: nothing within %v; last answer %v", queue, d, m)
	}
	ExpectMessage(t, m, queue, body)
	r.next().ExpectReply(http.StatusNoContent, queue, m.ID(), "ack")
	return took
}

// TestClusterEmbedded: three lmq-gateway binaries with --server-name,
// --cluster-name, --cluster-listen and --routes form a JetStream cluster
// with R3 queues; the API works across them; the cluster survives the loss
// of a node, and the node catches up when it returns.
func TestClusterEmbedded(t *testing.T) {
	heavy(t, "a cluster")
	t.Parallel()
	nodes := StartEmbeddedCluster(t, 3, "--replicas", "3")
	js := JetStreamOf(t, nodes[0].NATSURL+","+nodes[1].NATSURL+","+nodes[2].NATSURL)

	props := streamInfo(t, js, "KV_LMQ_PROPS")
	if props.Config.Replicas != 3 {
		t.Errorf("properties bucket: %d replicas, want 3", props.Config.Replicas)
	}

	r := newRR(t, nodes...)
	crossGatewayAPI(t, r, "emb", clusterSettle)

	const q = "emb-r3"
	roundTrip(t, r, q, "first", clusterSettle)
	info := QueueStream(t, js, q)
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("queue stream: %d replicas, cluster %+v; want R3 with a leader and two followers", info.Config.Replicas, info.Cluster)
	}
	// A consumer just made reports its cluster once its group has formed
	// (on a loaded machine, a moment after it answers pulls).
	ci := consumerInfo(t, js, q)
	testwait.Until(startTimeout, func() bool {
		ci = consumerInfo(t, js, q)
		return ci.Cluster != nil && len(ci.Cluster.Replicas) == 2
	})
	if ci.Cluster == nil || len(ci.Cluster.Replicas) != 2 {
		t.Fatalf("queue consumer: cluster %+v, want a leader and two followers", ci.Cluster)
	}
	t.Logf("R3 queue: stream leader %s, consumer leader %s", info.Cluster.Leader, ci.Cluster.Leader)

	// Lose the node leading the queue's stream.
	victim := 0
	for i := range nodes {
		if info.Cluster.Leader == nodeName(i) {
			victim = i
		}
	}
	nodes[victim].Kill()
	var alive []*Gateway
	for i, g := range nodes {
		if i != victim {
			alive = append(alive, g)
		}
	}
	r2 := newRR(t, alive...)
	took := roundTrip(t, r2, q, "after-kill", clusterSettle)
	t.Logf("killed %s; its queue took writes again after %v", nodeName(victim), took.Round(time.Millisecond))
	took = roundTrip(t, r2, "emb-new-while-down", "new", clusterSettle)
	t.Logf("a new R3 queue with one node down: created and used after %v", took.Round(time.Millisecond))
	crossGatewayAPI(t, r2, "emb2", clusterSettle)

	// The node comes back and catches up.
	nodes[victim].Restart()
	testwait.WithinDetail(t, clusterSettle, "restarted node current on the queue's stream", func() (bool, string) {
		info := QueueStream(t, js, q)
		if info.Cluster == nil {
			return false, "no cluster info"
		}
		for _, p := range info.Cluster.Replicas {
			if !p.Current || p.Offline {
				return false, p.Name + " not current"
			}
		}
		return len(info.Cluster.Replicas) == 2, info.Cluster.Leader
	})
	roundTrip(t, newRR(t, nodes[victim], alive[0]), q, "after-restart", clusterSettle)
}

// TestClusterExternal: two gateways on an external three-node NATS cluster
// (--nats-url with all three servers, --replicas 3). The API works across
// them; when the server a gateway is connected to goes away, the gateway
// reconnects to another one and goes on.
func TestClusterExternal(t *testing.T) {
	heavy(t, "a cluster")
	t.Parallel()
	servers, opts := StartNATSCluster(t, 3, nil)
	urls := ClientURLs(servers)
	a := StartWithNATS(t, urls, "--replicas", "3")
	b := StartWithNATS(t, urls, "--replicas", "3")
	r := newRR(t, a, b)
	crossGatewayAPI(t, r, "ext", clusterSettle)
	crossGatewayRPC(t, a, b)

	js := JetStreamOf(t, urls)
	mixedReplicas(t, js, urls, a, b)

	const q = "ext-failover"
	roundTrip(t, r, q, "before", clusterSettle)
	info := QueueStream(t, js, q)
	if info.Config.Replicas != 3 {
		t.Fatalf("queue stream: %d replicas, want 3", info.Config.Replicas)
	}
	// Stop every server in turn but the last, each time waiting for the
	// gateways to carry on: each gateway loses its server at least once.
	for i := range len(servers) - 1 {
		s := servers[i]
		s.Shutdown()
		s.WaitForShutdown()
		took := roundTrip(t, r, q, "after-stop-"+s.Name(), clusterSettle)
		t.Logf("stopped %s: writes again after %v", s.Name(), took.Round(time.Millisecond))
		if i == 0 {
			// Back before the next one goes, or no majority would be left.
			servers[i] = RestartNATS(t, s, opts[i])
			testwait.WithinDetail(t, clusterSettle, "restarted server current", func() (bool, string) {
				info := QueueStream(t, js, q)
				for _, p := range info.Cluster.Replicas {
					if !p.Current {
						return false, p.Name
					}
				}
				return true, ""
			})
		}
	}
	// The properties bucket may still be electing a leader after the second
	// stop; a write meanwhile waits up to 5 s for one (gateway/props), which
	// a slow election on a loaded machine can outlast.
	testwait.WithinDetail(t, clusterSettle, "properties bucket has a leader", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, "KV_LMQ_PROPS")
		if err != nil {
			return false, err.Error()
		}
		c := st.CachedInfo().Cluster
		return c != nil && c.Leader != "", "no leader"
	})
	crossGatewayAPI(t, r, "ext2", clusterSettle)
}

// mixedReplicas: a gateway started with another --replicas (1) uses the R3
// queues the others made, and they use the R1 queue it makes: a queue's
// replica count is the one of the gateway that created it. It leaves the
// shared properties bucket as it was.
func mixedReplicas(t *testing.T, js jetstream.JetStream, urls string, r3 ...*Gateway) {
	t.Helper()
	one := StartWithNATS(t, urls, "--replicas", "1")
	mixed := newRR(t, append([]*Gateway{one}, r3...)...)
	roundTrip(t, newRR(t, r3[0]), "ext-r3", "made by an R3 gateway", clusterSettle)
	for i := range 3 {
		roundTrip(t, mixed, "ext-r3", "mixed "+string(rune('a'+i)), clusterSettle)
	}
	roundTrip(t, newRR(t, one), "ext-r1", "made by an R1 gateway", clusterSettle)
	for i := range 3 {
		roundTrip(t, mixed, "ext-r1", "mixed "+string(rune('a'+i)), clusterSettle)
	}
	if n := QueueStream(t, js, "ext-r3").Config.Replicas; n != 3 {
		t.Errorf("ext-r3: %d replicas, want 3", n)
	}
	if n := QueueStream(t, js, "ext-r1").Config.Replicas; n != 1 {
		t.Errorf("ext-r1: %d replicas, want 1", n)
	}
	if n := streamInfo(t, js, "KV_LMQ_PROPS").Config.Replicas; n != 3 {
		t.Errorf("the R1 gateway rescaled the shared properties bucket to %d replicas", n)
	}
	// An R1 queue is offline while its one server is down, and GET /queues
	// then answers 503 for all queues: drop it before servers are stopped.
	mixed.next().Expect(http.StatusNoContent, http.MethodDelete, "/queues/ext-r1", nil)
}

// TestClusterExternalTLSAuth: the gateway reaches a NATS server that wants
// TLS with a client certificate and a user and password (--nats-tls-ca,
// --nats-tls-cert, --nats-tls-key, --nats-user, --nats-password); a wrong
// password ends the start at once with the server's answer.
func TestClusterExternalTLSAuth(t *testing.T) {
	t.Parallel()
	pki := testpki.Write(t, t.TempDir())
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: pki["server.pem"], KeyFile: pki["server-key.pem"], CaFile: pki["ca.pem"], Verify: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	servers, _ := StartNATSCluster(t, 1, func(_ int, o *server.Options) {
		o.Cluster, o.Routes = server.ClusterOpts{}, nil
		o.TLS, o.TLSVerify, o.TLSConfig, o.TLSTimeout = true, true, tc, 2
		o.Username, o.Password = "lmq", "s3cret"
	})
	s := servers[0]
	url := strings.Replace(s.ClientURL(), "nats://", "tls://", 1)
	tlsArgs := []string{"--nats-tls-ca", pki["ca.pem"], "--nats-tls-cert", pki["client.pem"], "--nats-tls-key", pki["client-key.pem"]}

	gw := StartWithNATS(t, url, append(tlsArgs, "--nats-user", "lmq", "--nats-password", "s3cret")...)
	roundTrip(t, newRR(t, gw), "tls-auth", "secret message", clusterSettle)

	// A wrong password is not retried (natsconn's TestConnectUserPassword
	// checks that no attempt is repeated): the process ends by itself. The
	// bound only stops a start that waits instead.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"--http-listen", anyPort, "--rpc-listen", "", "--nats-url", url, "--nats-user", "lmq", "--nats-password", "wrong"}, tlsArgs...)
	cmd := exec.CommandContext(ctx, gatewayBinary, args...)
	setDeathSignal(cmd)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("wrong password: exit %v after %v, want a failed start, not a wait:\n%s", err, time.Since(start), out)
	}
	if !strings.Contains(strings.ToLower(string(out)), "authorization") {
		t.Errorf("wrong password: the error does not say why:\n%s", out)
	}
}

func streamInfo(t *testing.T, js jetstream.JetStream, name string) *jetstream.StreamInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Stream asks for the stream's info: CachedInfo is that answer.
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return st.CachedInfo()
}

// consumerInfo is the queue's consumer (made by its first pull).
func consumerInfo(t *testing.T, js jetstream.JetStream, queue string) *jetstream.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Consumer asks for the consumer's info: CachedInfo is that answer.
	cons, err := js.Consumer(ctx, mapping.StreamName(queue), mapping.ConsumerName(queue))
	if err != nil {
		t.Fatalf("consumer of %s: %v", mapping.StreamName(queue), err)
	}
	return cons.CachedInfo()
}
