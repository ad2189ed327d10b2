package e2e

// Helpers of the cluster and fault tests (cluster_test.go, fault_test.go):
// several gateways, embedded, in-process or nats-server process clusters
// (the last to be killed with SIGKILL), a steady push/pull/ack load that
// survives its targets dying, and the ledger that
// accounts for every message of it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// StartEmbeddedCluster runs n lmq-gateway processes whose embedded servers
// form one JetStream cluster (--server-name n<i>, --cluster-name lmq,
// --cluster-listen, --routes), each with its own data directory and
// loopback ports the kernel picks, and waits until all answer HTTP.
// extraArgs go to every node (e.g. "--replicas", "3"). A new cluster has no
// JetStream until its nodes have met, so none of them becomes ready alone:
// the first node is started, reports its route port (the ports file's early
// write), and the others are started with a route to it; they learn of each
// other from it (NATS gossips routes), as nodes configured with one seed do.
// The first node's own route, which JetStream requires, leads through a
// relay of the test to the second node (routeRelay).
func StartEmbeddedCluster(t testing.TB, n int, extraArgs ...string) []*Gateway {
	t.Helper()
	// The first TempDir registers the removal of the test's temporary
	// directories; done before newGateway registers the shutdowns, it runs
	// after them (cleanups run last first), when no node writes any more.
	_ = t.TempDir()
	relay := newRouteRelay(t)
	gws := make([]*Gateway, n)
	for i := range n {
		g := newGateway(t)
		g.DataDir = t.TempDir()
		g.cluster = gws
		g.args = append(g.embeddedArgs("warn"),
			"--server-name", fmt.Sprintf("n%d", i),
			"--cluster-name", "lmq",
			"--cluster-listen", anyPort,
			"--routes", "") // set below
		g.args = append(g.args, extraArgs...)
		gws[i] = g
	}
	hasCluster := func(a boundAddrs) bool { return a.Cluster != "" }
	setRoutes(gws[0], "nats-route://"+relay.addr())
	launchGateway(gws[0], nil)
	seed := "nats-route://" + gws[0].awaitPorts("its route port", hasCluster).Cluster
	for _, g := range gws[1:] {
		setRoutes(g, seed)
		launchGateway(g, nil)
	}
	// A single node's route leads to itself, as a node's own entry in a
	// full list of routes would.
	relay.to(gws[min(1, n-1)].awaitPorts("its route port", hasCluster).Cluster)
	if err := awaitGateways(gws); err != nil {
		t.Fatal(err)
	}
	return gws
}

// setRoutes sets the value of g's --routes.
func setRoutes(g *Gateway, routes string) {
	i := slices.Index(g.args, "--routes")
	g.args[i+1] = routes
}

// clusterRoutes lists the route ports the cluster's nodes bound, as
// --routes wants them.
func clusterRoutes(gws []*Gateway) string {
	routes := make([]string, len(gws))
	for i, g := range gws {
		routes[i] = "nats-route://" + g.Bound.Cluster
	}
	return strings.Join(routes, ",")
}

// restartCluster starts every node of a stopped cluster again, together (a
// cluster's JetStream needs a majority of its nodes before any is ready),
// with their data, on the ports they had, each with a route to every node.
func restartCluster(t testing.TB, gws []*Gateway) {
	t.Helper()
	for _, g := range gws {
		g.pinPorts()
		launchGateway(g, nil)
	}
	if err := awaitGateways(gws); err != nil {
		t.Fatal(err)
	}
}

// routeRelay is a listener of the test, held until the test ends, that
// relays every connection to a cluster node's route port once that is
// known (to): the route a cluster's first node is started with, before any
// other node has a port. A connection that comes earlier waits for it.
type routeRelay struct {
	l      net.Listener
	known  chan struct{} // closed by to
	target string
}

func newRouteRelay(t testing.TB) *routeRelay {
	t.Helper()
	l, err := net.Listen("tcp", anyPort)
	if err != nil {
		t.Fatal(err)
	}
	r := &routeRelay{l: l, known: make(chan struct{})}
	done := make(chan struct{})
	t.Cleanup(func() {
		l.Close()
		close(done)
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return // closed at the test's end
			}
			go r.relay(c, done)
		}
	}()
	return r
}

func (r *routeRelay) addr() string { return r.l.Addr().String() }

// to sets the address connections are relayed to; called once.
func (r *routeRelay) to(addr string) {
	r.target = addr
	close(r.known)
}

// relay copies between c and a new connection to the target until either
// side closes.
func (r *routeRelay) relay(c net.Conn, done <-chan struct{}) {
	defer c.Close()
	select {
	case <-r.known:
	case <-done:
		return
	}
	up, err := net.Dial("tcp", r.target)
	if err != nil {
		return // the node retries its route
	}
	defer up.Close()
	copied := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); copied <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); copied <- struct{}{} }()
	<-copied // one side closed: so do both (the defers), ending the other copy
	<-copied
}

// StartNATSCluster runs an n-node nats-server cluster with JetStream inside
// the test process, on loopback ports the servers pick (RANDOM_PORT), and
// returns the servers and their options (for RestartNATS); edit (may be
// nil) adjusts each node's options. The first server is started first, the
// others with a route to its cluster port, as in StartEmbeddedCluster. They
// are shut down when t ends.
func StartNATSCluster(t testing.TB, n int, edit func(i int, o *server.Options)) ([]*server.Server, []*server.Options) {
	t.Helper()
	relay := newRouteRelay(t)
	servers := make([]*server.Server, n)
	all := make([]*server.Options, n)
	routes := server.RoutesFromStr("nats://" + relay.addr())
	for i := range n {
		o := &server.Options{
			ServerName: fmt.Sprintf("x%d", i),
			Host:       "127.0.0.1",
			Port:       server.RANDOM_PORT,
			JetStream:  true,
			StoreDir:   t.TempDir(),
			NoLog:      true,
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: "ext", Host: "127.0.0.1", Port: server.RANDOM_PORT},
			Routes:     routes,
		}
		if edit != nil {
			edit(i, o)
		}
		all[i] = o
		s, err := server.NewServer(o)
		if err != nil {
			t.Fatalf("nats-server %d: %v", i, err)
		}
		go s.Start()
		servers[i] = s
		t.Cleanup(func() {
			s.Shutdown()
			s.WaitForShutdown()
		})
		if i > 1 || o.Cluster.Port == 0 { // a node edit made a single server
			continue
		}
		testwait.Within(t, startTimeout, fmt.Sprintf("nats-server %d binds its cluster port", i), func() bool { return s.ClusterAddr() != nil })
		if i == 0 {
			routes = server.RoutesFromStr("nats://" + s.ClusterAddr().String())
		}
		if i == min(1, n-1) { // a single node's route leads to itself, as a node's own entry in a full list would
			relay.to(s.ClusterAddr().String())
		}
	}
	for i, s := range servers {
		if !s.ReadyForConnections(startTimeout) {
			t.Fatalf("nats-server %d not ready within %v", i, startTimeout)
		}
		// RestartNATS starts a node on the ports it had: its peers' routes
		// and the relay name them.
		if a := s.ClusterAddr(); a != nil {
			all[i].Cluster.Port = a.Port
		}
	}
	if !slices.ContainsFunc(all, func(o *server.Options) bool { return o.Cluster.Port == 0 }) {
		awaitJetStreamCluster(t, ClientURLs(servers), n)
	}
	return servers, all
}

// RestartNATS starts a stopped in-process server again with its options, on
// the same client port and data; it is shut down when t ends. The port was
// the server's until it stopped a moment ago (the kernel hands out fresh
// ports in turn), and the clients' URLs name it.
func RestartNATS(t testing.TB, old *server.Server, opts *server.Options) *server.Server {
	t.Helper()
	o := opts.Clone()
	if u, err := url.Parse(old.ClientURL()); err == nil {
		fmt.Sscan(u.Port(), &o.Port)
	}
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatalf("restart %s: %v", old.Name(), err)
	}
	go s.Start()
	if !s.ReadyForConnections(startTimeout) {
		t.Fatalf("restart %s: not ready within %v", old.Name(), startTimeout)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// ClientURLs joins the servers' client URLs as --nats-url wants them.
func ClientURLs(servers []*server.Server) string {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.ClientURL()
	}
	return strings.Join(urls, ",")
}

// NATSProc is one nats-server process of StartNATSProcs: an external NATS
// server that can be killed with SIGKILL, as a crashed host would be (an
// in-process server's Shutdown hands its Raft leaderships over first).
type NATSProc struct {
	Name string // its server name, x<i>
	URL  string // its client URL, nats://127.0.0.1:<port>

	t      testing.TB
	cmd    *exec.Cmd
	exited chan struct{}
	out    *tailBuffer
}

// StartNATSProcs builds nats-server (the version in go.mod) and runs an
// n-node JetStream cluster of it on loopback ports it picks, and waits until
// every node takes client connections. The processes are killed when t ends.
func StartNATSProcs(t testing.TB, n int) []*NATSProc {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "nats-server")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	// Run in the package's directory, inside this module: its go.mod
	// names the nats-server version.
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/nats-io/nats-server/v2").CombinedOutput(); err != nil {
		t.Fatalf("build nats-server: %v\n%s", err, out)
	}
	// Like StartNATSCluster: ports the servers pick (-1), reported in the
	// ports file nats-server writes (--ports_file_dir); the first node is
	// started first, the others with a route to it.
	relay := newRouteRelay(t)
	route := "nats://" + relay.addr()
	procs := make([]*NATSProc, n)
	for i := range n {
		p := &NATSProc{Name: fmt.Sprintf("x%d", i), t: t, exited: make(chan struct{}), out: &tailBuffer{max: 1 << 20}}
		nodeDir := filepath.Join(dir, p.Name)
		conf := filepath.Join(dir, p.Name+".conf")
		if err := os.MkdirAll(nodeDir, 0o700); err != nil {
			t.Fatal(err)
		}
		opsWriteFile(t, conf, fmt.Sprintf("server_name: %s\nhost: 127.0.0.1\nport: -1\njetstream { store_dir: %q }\n"+
			"cluster { name: ext, host: 127.0.0.1, port: -1, routes: [%q] }\n", p.Name, filepath.Join(nodeDir, "js"), route))
		p.cmd = exec.Command(bin, "-c", conf, "--ports_file_dir", nodeDir)
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		setDeathSignal(p.cmd)
		if err := p.cmd.Start(); err != nil {
			t.Fatalf("start nats-server %s: %v", p.Name, err)
		}
		go func() {
			_ = p.cmd.Wait()
			close(p.exited)
		}()
		t.Cleanup(func() {
			p.Kill()
			if t.Failed() {
				t.Logf("nats-server %s output:\n%s", p.Name, p.out.String())
			}
		})
		procs[i] = p
		ports := p.awaitPorts(filepath.Join(nodeDir, fmt.Sprintf("nats-server_%d.ports", p.cmd.Process.Pid)))
		p.URL = ports.Nats[0]
		if i == 0 {
			route = ports.Cluster[0]
		}
		if i == min(1, n-1) {
			relay.to(strings.TrimPrefix(ports.Cluster[0], "nats://"))
		}
	}
	for _, p := range procs {
		if !testwait.Until(startTimeout, func() bool {
			c, err := net.DialTimeout("tcp", strings.TrimPrefix(p.URL, "nats://"), time.Second)
			if err == nil {
				c.Close()
			}
			return err == nil
		}) {
			t.Fatalf("nats-server %s does not take connections within %v:\n%s", p.Name, startTimeout, p.out.String())
		}
	}
	awaitJetStreamCluster(t, NATSProcURLs(procs), n)
	return procs
}

// awaitJetStreamCluster waits until the JetStream cluster at urls places and
// serves a stream on all its n nodes: a stream of n replicas is created, takes
// a message and is deleted. Nodes that take client connections may not have
// met yet: they learn of each other through the first node (the seed), and
// until every one has joined the meta group, a replicated stream made at
// once may wait for a leader longer than a store's bound (a push answered
// 503 that the test did not expect). Bounded by startTimeout, reached only
// on failure.
func awaitJetStreamCluster(t testing.TB, urls string, n int) {
	t.Helper()
	if n < 2 {
		return
	}
	nc, err := nats.Connect(urls)
	if err != nil {
		t.Fatalf("connect to NATS %s: %v", urls, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const name = "E2E_CLUSTER_READY"
	testwait.WithinDetail(t, startTimeout, fmt.Sprintf("the %d-node JetStream cluster serves a stream of %d replicas", n, n), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: name, Subjects: []string{"e2e.cluster.ready"}, Storage: jetstream.MemoryStorage, Replicas: n,
		})
		if err == nil {
			_, err = js.Publish(ctx, "e2e.cluster.ready", nil)
		}
		if err == nil {
			var info *jetstream.StreamInfo
			if info, err = st.Info(ctx); err == nil && (info.Cluster == nil || len(info.Cluster.Replicas) != n-1) {
				err = fmt.Errorf("stream not yet placed on all %d nodes: %+v", n, info.Cluster)
			}
		}
		if err != nil {
			// Start the next try from a fresh placement: a probe stream
			// made while the nodes were still meeting can stay without a
			// leader ("no response from stream") long after they met.
			_ = js.DeleteStream(ctx, name)
			return false, err.Error()
		}
		return js.DeleteStream(ctx, name) == nil, "delete the probe stream"
	})
}

// awaitPorts waits for the ports file nats-server writes once it listens.
func (p *NATSProc) awaitPorts(path string) server.Ports {
	p.t.Helper()
	var ports server.Ports
	testwait.WithinDetail(p.t, startTimeout, "nats-server "+p.Name+" writes "+path, func() (bool, string) {
		select {
		case <-p.exited:
			p.t.Fatalf("nats-server %s exited during start-up:\n%s", p.Name, p.out.String())
		default:
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return false, err.Error()
		}
		// nats-server writes the file in place: until it parses with both
		// ports, it is being written.
		err = json.Unmarshal(b, &ports)
		return err == nil && len(ports.Nats) > 0 && len(ports.Cluster) > 0, string(b)
	})
	return ports
}

// Kill ends the server with SIGKILL and waits until it is gone; idempotent.
func (p *NATSProc) Kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// NATSProcURLs joins the servers' client URLs as --nats-url wants them.
func NATSProcURLs(procs []*NATSProc) string {
	urls := make([]string, len(procs))
	for i, p := range procs {
		urls[i] = p.URL
	}
	return strings.Join(urls, ",")
}

// moveStreamLeader asks the leader of the queue's stream to step down until
// ok accepts the leader's name, and returns it: a test then knows which node
// it kills.
func moveStreamLeader(t testing.TB, js jetstream.JetStream, queue string, ok func(leader string) bool) string {
	t.Helper()
	leader := ""
	for range 20 {
		info := QueueStream(t, js, queue)
		if info.Cluster == nil {
			t.Fatalf("queue %q: no cluster info", queue)
		}
		if leader = info.Cluster.Leader; leader != "" && ok(leader) {
			return leader
		}
		// A step-down hands the leadership to another current replica.
		_, _ = js.Conn().Request("$JS.API.STREAM.LEADER.STEPDOWN."+info.Config.Name, nil, 5*time.Second)
		testwait.Until(10*time.Second, func() bool {
			now := QueueStream(t, js, queue).Cluster.Leader
			return now != "" && now != leader
		})
	}
	t.Fatalf("queue %q: could not move the stream leader (now %q)", queue, leader)
	return ""
}

// JetStreamOf connects the test itself to NATS (to check what the gateways
// stored); the connection is closed when t ends.
func JetStreamOf(t testing.TB, urls string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to NATS %s: %v", urls, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// QueueStream returns the info of a queue's stream, retrying while the
// cluster elects leaders.
func QueueStream(t testing.TB, js jetstream.JetStream, queue string) *jetstream.StreamInfo {
	t.Helper()
	var info *jetstream.StreamInfo
	testwait.WithinDetail(t, 20*time.Second, "stream of queue "+queue, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, mapping.StreamName(queue))
		if err == nil {
			if info, err = queueInfo(ctx, st, queue); err == nil {
				return true, ""
			}
		}
		return false, err.Error()
	})
	return info
}

// ---- load and accounting ----

// LoadConfig shapes a steady push/pull/ack load on one queue through several
// gateways.
type LoadConfig struct {
	Queue string
	// Targets are the gateways' HTTP base URLs. Each client sends each of its
	// requests to the next target, so consecutive requests of one client hit
	// different gateways, and replies are sent to a different gateway than
	// the one that delivered (relayed by the core).
	Targets   []string
	Producers int
	Consumers int
	// PushPause is each producer's pause between pushes (bounds the rate).
	PushPause time.Duration
	// Hold is how long a consumer keeps a delivery before replying (its
	// processing time), so that a dying gateway has deliveries in flight.
	Hold time.Duration
	// ExtEvery and NackEvery: every n-th delivery of a consumer is first
	// extended, or nacked instead of acked (0: never).
	ExtEvery  int
	NackEvery int
}

// MixedLoad is a running LoadConfig; the ledger accounts for every message.
type MixedLoad struct {
	cfg      LoadConfig
	hc       *http.Client
	led      *LoadLedger
	down     []atomic.Int64 // per target: unix nanos until which it is skipped
	stopPush chan struct{}
	stopPull chan struct{}
	pushers  sync.WaitGroup
	pullers  sync.WaitGroup
	seq      atomic.Int64
}

// Bounds of the load's requests (issue 20). The gateway answers a push, an
// ack, a nack or an ext within 5 s (gateway storeTimeout and replyTimeout),
// a reply relayed to another gateway within 1 s more; 4 s of slack for a
// loaded machine. A pull answers within its wait (t) plus the same. A
// request over its bound is a figure (logged with its duration), not a
// failure: elections and a loaded machine make requests slow. The client's
// own timeout is a safety net many times larger: a request it cuts was not
// slow but hung (LoadLedger.Hung), which fails the test.
const (
	requestBound  = 10 * time.Second
	pullWait      = time.Second // the consumers' ?t=1
	clientTimeout = time.Minute
)

// LoadLedger is the accounting of a load: what was pushed, delivered, acked.
type LoadLedger struct {
	mu          sync.Mutex
	pushed      map[string]bool // push answered 200
	refused     map[string]int  // push answered an error status other than 504 (body → status)
	msgs        map[string]*msgState
	pushFailed  int // answered, not 200
	pushUnsure  int // transport error: may or may not be stored
	pullFailed  int // answered neither 200 nor 204, or transport error
	deliveries  int
	duplicates  int // deliveries of a message after an ack of it was answered 204
	nacks       int
	exts        int
	replyLost   int // ack/nack/ext answered 404: the delivery was gone (expired, or its gateway died)
	replyFailed int // answered another error
	replyUnsure int // transport error on an ack: it may have been applied
	push504     int // pushes answered 504 (outcome unknown)
	reply504    int // replies answered 504

	// Durations: the longest request of each kind, and those over their bound.
	longest   map[string]timedRequest
	overBound int
	overFirst []timedRequest // the first few over their bound
	// hung are the requests the client cut after clientTimeout without an
	// answer (the first few).
	hung      int
	hungFirst []timedRequest
	// okAt[kind][target]: when the requests of a kind (push answered 200,
	// pull answered with a message, ack answered 204) sent to a target
	// (its index in LoadConfig.Targets) succeeded.
	okAt map[string]map[int][]time.Time
}

// timedRequest is one request of the load, for the duration accounting.
type timedRequest struct {
	kind    string // push, pull, ack, nack, ext
	target  string
	outcome string // status or transport error
	took    time.Duration
	bound   time.Duration
}

func (r timedRequest) String() string {
	return fmt.Sprintf("%s to %s: %s after %v (bound %v)", r.kind, r.target, r.outcome, r.took.Round(time.Millisecond), r.bound)
}

// timed records one request's duration; status 0 means a transport error.
func (l *LoadLedger) timed(kind, target string, bound, took time.Duration, status int, err error) {
	outcome := strconv.Itoa(status)
	if err != nil {
		outcome = err.Error()
	}
	r := timedRequest{kind: kind, target: target, outcome: outcome, took: took, bound: bound}
	l.mu.Lock()
	defer l.mu.Unlock()
	if took > l.longest[kind].took {
		l.longest[kind] = r
	}
	if took > bound {
		l.overBound++
		if len(l.overFirst) < 10 {
			l.overFirst = append(l.overFirst, r)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		l.hung++
		if len(l.hungFirst) < 10 {
			l.hungFirst = append(l.hungFirst, r)
		}
	}
}

// Hung returns how many requests got no answer before the client's own
// timeout (clientTimeout), and the first few of them.
func (l *LoadLedger) Hung() (int, []timedRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hung, slices.Clone(l.hungFirst)
}

// progress is a count that grows whenever the load achieves something (a
// push answered 200, a delivery, an ack answered 204): for the stall
// detectors of the load's phases.
func (l *LoadLedger) progress() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := int64(len(l.pushed) + l.deliveries)
	for _, ts := range l.okAt["ack"] {
		n += int64(len(ts))
	}
	return n
}

// OverBound returns how many requests took longer than their bound, and the
// first few of them.
func (l *LoadLedger) OverBound() (int, []timedRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.overBound, slices.Clone(l.overFirst)
}

// Longest describes the longest request of each kind.
func (l *LoadLedger) Longest() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, k := range []string{"push", "pull", "ack", "nack", "ext"} {
		if r, ok := l.longest[k]; ok {
			fmt.Fprintf(&b, "%s %v (%s); ", k, r.took.Round(time.Millisecond), r.outcome)
		}
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// succeeded notes a successful request of kind to target (with l.mu held).
func (l *LoadLedger) succeeded(kind string, target int) {
	byTarget := l.okAt[kind]
	if byTarget == nil {
		byTarget = make(map[int][]time.Time)
		l.okAt[kind] = byTarget
	}
	byTarget[target] = append(byTarget[target], time.Now())
}

// Window returns the longest stretch of time in [from, to] in which no
// request of kind (push, pull, ack) succeeded: through any of the targets,
// and through each (indexed as LoadConfig.Targets).
func (l *LoadLedger) Window(kind string, targets int, from, to time.Time) (any time.Duration, each []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var all []time.Time
	for i := range targets {
		ts := l.okAt[kind][i]
		all = append(all, ts...)
		each = append(each, longestGap(ts, from, to))
	}
	return longestGap(all, from, to), each
}

// longestGap is the longest interval of [from, to] without one of times.
func longestGap(times []time.Time, from, to time.Time) time.Duration {
	ts := slices.Clone(times)
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	longest, prev := time.Duration(0), from
	for _, at := range ts {
		if at.Before(from) || at.After(to) {
			continue
		}
		longest = max(longest, at.Sub(prev))
		prev = at
	}
	return max(longest, to.Sub(prev))
}

type msgState struct {
	deliveries int
	acked      int  // acks answered 204
	unsureAck  bool // an ack that got no answer
}

// LoadTotals is a ledger's summary.
type LoadTotals struct {
	Pushed, PushFailed, PushUnsure                 int
	Delivered, Deliveries, Redeliveries            int
	Acked, Duplicates, Extras, Lost                int
	StoredRefused                                  int // delivered although its push was refused (e.g. 503)
	Nacks, Exts, ReplyLost, ReplyFailed, AckUnsure int
	PullFailed                                     int
	Push504, Reply504                              int // answered "outcome unknown"
	OverBound                                      int // requests that took longer than their bound
	Hung                                           int // requests without an answer within clientTimeout
}

func (t LoadTotals) String() string {
	return fmt.Sprintf("pushed=%d acked=%d lost=%d duplicates=%d | push errors=%d push unsure=%d (504: %d) pull errors=%d | "+
		"deliveries=%d (messages %d, redeliveries %d) nacks=%d exts=%d | replies 404=%d errors=%d ack unsure=%d (504s: %d) | "+
		"extras=%d stored-but-refused=%d over-bound=%d hung=%d",
		t.Pushed, t.Acked, t.Lost, t.Duplicates, t.PushFailed, t.PushUnsure, t.Push504, t.PullFailed,
		t.Deliveries, t.Delivered, t.Redeliveries, t.Nacks, t.Exts, t.ReplyLost, t.ReplyFailed, t.AckUnsure, t.Reply504,
		t.Extras, t.StoredRefused, t.OverBound, t.Hung)
}

// Totals sums the ledger up. Lost counts messages whose push was answered
// 200 and that were never acked (an ack that got no answer because its
// gateway died counts as acked only if the message did not come back).
// Extras are messages delivered whose push was not answered 200 (the
// gateway stored it and then failed to answer): not a loss, not a duplicate.
func (l *LoadLedger) Totals() LoadTotals {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := LoadTotals{
		Pushed: len(l.pushed), PushFailed: l.pushFailed, PushUnsure: l.pushUnsure, PullFailed: l.pullFailed,
		Deliveries: l.deliveries, Duplicates: l.duplicates, Nacks: l.nacks, Exts: l.exts,
		ReplyLost: l.replyLost, ReplyFailed: l.replyFailed, AckUnsure: l.replyUnsure,
		Push504: l.push504, Reply504: l.reply504, OverBound: l.overBound, Hung: l.hung,
	}
	for body, m := range l.msgs {
		if m.deliveries > 0 {
			t.Delivered++
			t.Redeliveries += m.deliveries - 1
		}
		if m.acked > 0 || m.unsureAck {
			t.Acked++
		}
		if !l.pushed[body] {
			t.Extras++
		}
		if _, ok := l.refused[body]; ok && m.deliveries > 0 {
			t.StoredRefused++
		}
	}
	for body := range l.pushed {
		if m := l.msgs[body]; m == nil || (m.acked == 0 && !m.unsureAck) {
			t.Lost++
		}
	}
	return t
}

// settled reports whether every message pushed with 200 was acked.
func (l *LoadLedger) settled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for body := range l.pushed {
		if m := l.msgs[body]; m == nil || (m.acked == 0 && !m.unsureAck) {
			return false
		}
	}
	return true
}

func (l *LoadLedger) state(body string) *msgState {
	m := l.msgs[body]
	if m == nil {
		m = &msgState{}
		l.msgs[body] = m
	}
	return m
}

// StartMixedLoad starts the producers and consumers of cfg.
func StartMixedLoad(t testing.TB, cfg LoadConfig) *MixedLoad {
	t.Helper()
	if len(cfg.Targets) == 0 || cfg.Producers <= 0 || cfg.Consumers <= 0 {
		t.Fatalf("StartMixedLoad: bad config %+v", cfg)
	}
	l := &MixedLoad{
		cfg: cfg,
		hc: &http.Client{Transport: &http.Transport{
			Proxy:               nil, // loopback only
			MaxIdleConnsPerHost: 32,
			DisableCompression:  true,
		}},
		led: &LoadLedger{pushed: make(map[string]bool), refused: make(map[string]int), msgs: make(map[string]*msgState),
			longest: make(map[string]timedRequest), okAt: make(map[string]map[int][]time.Time)},
		down:     make([]atomic.Int64, len(cfg.Targets)),
		stopPush: make(chan struct{}),
		stopPull: make(chan struct{}),
	}
	for i := range cfg.Producers {
		l.pushers.Go(func() { l.produce(i) })
	}
	for i := range cfg.Consumers {
		l.pullers.Go(func() { l.consume(i) })
	}
	t.Cleanup(l.Stop)
	return l
}

// Timeline samples the ledger every interval until the load stops and
// returns a function that renders the samples as the number of messages
// pushed and acked in each interval, to show when the load stalled.
func (l *MixedLoad) Timeline(interval time.Duration) func() string {
	var (
		mu      sync.Mutex
		samples []LoadTotals
	)
	l.pullers.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-l.stopPull:
				return
			case <-tick.C:
				t := l.led.Totals()
				mu.Lock()
				samples = append(samples, t)
				mu.Unlock()
			}
		}
	})
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		var b strings.Builder
		prev := LoadTotals{}
		for i, t := range samples {
			fmt.Fprintf(&b, "%v:+%d/+%d ", time.Duration(i+1)*interval, t.Pushed-prev.Pushed, t.Acked-prev.Acked)
			prev = t
		}
		return b.String()
	}
}

// Ledger returns the load's accounting.
func (l *MixedLoad) Ledger() *LoadLedger { return l.led }

// pace is the load's own pacing: a back-off after a failed request, the
// configured pause between pushes, a delivery held before its ack. Time is
// what must pass there; no condition stands for it.
func pace(d time.Duration) { time.Sleep(d) }

// StopPushing ends the producers and waits for them.
func (l *MixedLoad) StopPushing() {
	select {
	case <-l.stopPush:
	default:
		close(l.stopPush)
	}
	l.pushers.Wait()
}

// Stop ends producers and consumers; idempotent.
func (l *MixedLoad) Stop() {
	l.StopPushing()
	select {
	case <-l.stopPull:
	default:
		close(l.stopPull)
	}
	l.pullers.Wait()
	l.hc.CloseIdleConnections()
}

// Drain stops pushing and lets the consumers run until every message pushed
// with 200 is acked and empty reports the queue empty. It gives up, with an
// error wrapping errStalled, only when no delivery and no ack succeeded for
// stall.
func (l *MixedLoad) Drain(stall time.Duration, empty func() bool) error {
	l.StopPushing()
	err := progressUntil(stall, l.led.progress, func() (bool, string) {
		settled := l.led.settled()
		return settled && empty(), fmt.Sprintf("every message pushed with 200 acked: %v", settled)
	})
	l.Stop()
	return err
}

// pick returns the index of the next target to use from *rr, skipping
// targets that failed a moment ago.
func (l *MixedLoad) pick(rr *int) int {
	n := len(l.cfg.Targets)
	now := time.Now().UnixNano()
	for range n {
		*rr = (*rr + 1) % n
		if l.down[*rr].Load() <= now {
			return *rr
		}
	}
	*rr = (*rr + 1) % n
	return *rr
}

// failed marks a target unreachable for a moment, as a load balancer would.
func (l *MixedLoad) failed(i int) {
	l.down[i].Store(time.Now().Add(time.Second).UnixNano())
}

// send does one request; transport errors come back as err.
func (l *MixedLoad) send(ctx context.Context, method, u string, body []byte) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	resp, err := l.hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, b, nil
}

func (l *MixedLoad) stopped(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (l *MixedLoad) produce(id int) {
	rr := id
	body := ""
	for !l.stopped(l.stopPush) {
		if body == "" {
			body = fmt.Sprintf("p%d-m%d", id, l.seq.Add(1))
		}
		ti := l.pick(&rr)
		ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
		sent := time.Now()
		status, _, _, err := l.send(ctx, http.MethodPost, l.cfg.Targets[ti]+"/messages/"+Q(l.cfg.Queue), []byte(body))
		took := time.Since(sent)
		cancel()
		if !notSent(err) {
			l.led.timed("push", l.cfg.Targets[ti], requestBound, took, status, err)
		}
		if notSent(err) {
			// Nobody listens there: try the same message on another gateway,
			// as a client behind a load balancer would.
			l.failed(ti)
			pace(5 * time.Millisecond)
			continue
		}
		l.led.mu.Lock()
		switch {
		case err != nil, status == http.StatusGatewayTimeout:
			// No answer, or the gateway's "outcome unknown": maybe stored.
			l.led.pushUnsure++
			if status == http.StatusGatewayTimeout {
				l.led.push504++
			}
		case status == http.StatusOK:
			l.led.pushed[body] = true
			l.led.succeeded("push", ti)
		default:
			l.led.pushFailed++
			l.led.refused[body] = status
		}
		l.led.mu.Unlock()
		body = ""
		if err != nil || status != http.StatusOK {
			l.failed(ti)
			pace(20 * time.Millisecond)
			continue
		}
		if l.cfg.PushPause > 0 {
			pace(l.cfg.PushPause)
		}
	}
}

func (l *MixedLoad) consume(id int) {
	rr := id
	n := 0
	for !l.stopped(l.stopPull) {
		ti := l.pick(&rr)
		ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
		sent := time.Now()
		status, hdr, body, err := l.send(ctx, http.MethodGet, l.cfg.Targets[ti]+"/messages/"+Q(l.cfg.Queue)+"?t=1", nil)
		took := time.Since(sent)
		cancel()
		if !notSent(err) {
			l.led.timed("pull", l.cfg.Targets[ti], pullWait+requestBound, took, status, err)
		}
		if err != nil || (status != http.StatusOK && status != http.StatusNoContent) {
			l.led.mu.Lock()
			l.led.pullFailed++
			l.led.mu.Unlock()
			l.failed(ti)
			pace(20 * time.Millisecond)
			continue
		}
		if status == http.StatusNoContent {
			continue
		}
		msg, id := string(body), hdr.Get(hID)
		l.led.mu.Lock()
		l.led.succeeded("pull", ti)
		l.led.deliveries++
		m := l.led.state(msg)
		m.deliveries++
		if m.acked > 0 {
			l.led.duplicates++
		}
		l.led.mu.Unlock()
		n++
		if l.cfg.Hold > 0 {
			pace(l.cfg.Hold)
		}
		if l.cfg.ExtEvery > 0 && n%l.cfg.ExtEvery == 0 {
			if st, _ := l.reply(&rr, msg, id, "ext"); st == http.StatusNoContent {
				l.led.mu.Lock()
				l.led.exts++
				l.led.mu.Unlock()
			}
		}
		if l.cfg.NackEvery > 0 && n%l.cfg.NackEvery == 0 {
			if st, _ := l.reply(&rr, msg, id, "nack"); st == http.StatusNoContent {
				l.led.mu.Lock()
				l.led.nacks++
				l.led.mu.Unlock()
			}
			continue
		}
		st, err := l.reply(&rr, msg, id, "ack")
		l.led.mu.Lock()
		switch {
		case err != nil, st == http.StatusGatewayTimeout:
			// No answer, or "outcome unknown": the ack may have been applied.
			m.unsureAck = true
		case st == http.StatusNoContent:
			m.acked++
		}
		l.led.mu.Unlock()
	}
}

// reply sends ack, nack or ext for a delivery to the next target (not the
// one that delivered it, when there are several) and accounts for failures.
// A gateway that is not listening is skipped: the reply goes to the next.
func (l *MixedLoad) reply(rr *int, msg, id, kind string) (int, error) {
	var (
		ti     int
		status int
		err    error
	)
	for range 2 * len(l.cfg.Targets) {
		ti = l.pick(rr)
		ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
		sent := time.Now()
		status, _, _, err = l.send(ctx, http.MethodPost, l.cfg.Targets[ti]+"/messages/"+Q(l.cfg.Queue)+"/"+url.PathEscape(id)+"?reply="+kind, nil)
		took := time.Since(sent)
		cancel()
		if !notSent(err) {
			l.led.timed(kind, l.cfg.Targets[ti], requestBound, took, status, err)
			break
		}
		l.failed(ti)
		pace(5 * time.Millisecond)
	}
	l.led.mu.Lock()
	defer l.led.mu.Unlock()
	switch {
	case notSent(err):
		l.led.replyFailed++ // no gateway listened at all
	case err != nil, status == http.StatusGatewayTimeout:
		l.failed(ti)
		if status == http.StatusGatewayTimeout {
			l.led.reply504++
		}
		if kind == "ack" {
			l.led.replyUnsure++
		} else {
			l.led.replyFailed++
		}
	case status == http.StatusNoContent:
		if kind == "ack" {
			l.led.succeeded("ack", ti)
		}
	case status == http.StatusNotFound:
		l.led.replyLost++
	case status != http.StatusNoContent:
		l.failed(ti)
		l.led.replyFailed++
	}
	return status, err
}

// notSent reports whether a request failed before it reached a gateway
// (nothing listens at its address), so that it certainly had no effect.
func notSent(err error) bool {
	var op *net.OpError
	return err != nil && errors.As(err, &op) && op.Op == "dial"
}

// QueueEmpty returns a check that the queue's stream holds no message (none
// waiting, none in flight), asking NATS through js.
func QueueEmpty(js jetstream.JetStream, queue string) func() bool {
	return QueueHolds(js, queue, 0)
}

// QueueHolds is a condition for pollUntil: the queue's stream holds n of
// its messages (waiting or in flight), asking NATS through js.
func QueueHolds(js jetstream.JetStream, queue string, n uint64) func() bool {
	return func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, mapping.StreamName(queue))
		if err != nil {
			return false
		}
		info, err := queueInfo(ctx, st, queue)
		return err == nil && info.State.Msgs == n
	}
}

// queueInfo is the info of the queue's shard stream with State.Msgs narrowed
// to the queue's own messages (its subjects' counts): other queues share
// the stream.
func queueInfo(ctx context.Context, st jetstream.Stream, queue string) (*jetstream.StreamInfo, error) {
	var info *jetstream.StreamInfo
	var msgs uint64
	for _, filter := range mapping.QueueSubjects(queue) {
		var err error
		if info, err = st.Info(ctx, jetstream.WithSubjectFilter(filter)); err != nil {
			return nil, err
		}
		for _, n := range info.State.Subjects {
			msgs += n
		}
	}
	info.State.Msgs = msgs
	return info, nil
}
