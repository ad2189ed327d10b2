package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// Issue 25, finding 6b: after kill -9 of one node of an embedded
// three-node cluster, `lmq-gateway status` and the console's Cluster page
// still showed it up 70 s later (JetStream marks a server offline only when
// its system heartbeats have stopped for minutes). Now the status command,
// /stats, the Cluster page and /readyz?verbose show a node that is gone as
// down within seconds: a killed one (its connections close) and a frozen
// one (SIGSTOP: connections open, nothing answers, as a machine that
// vanished), and up again once it is back.

// nodeDownDeadline only keeps a broken test from waiting forever; the
// times it takes are logged, not bounded (a loaded machine may be slow).
const nodeDownDeadline = 60 * time.Second

// nodeViews is what one gateway says of the cluster's nodes in each place
// that shows them: per view, the set of nodes it calls down (of those it
// lists) and when that answer came; a view that did not answer is missing.
type nodeViews map[string]nodeView

type nodeView struct {
	down map[string]bool
	at   time.Time
}

// nodeViewsOf asks gateway g for every view, and says what went wrong. It
// does not touch t, so that the gateways may be asked at once.
func nodeViewsOf(t *testing.T, g *Gateway) (nodeViews, string) {
	c := g.Client(t)
	v := nodeViews{}
	var problems []string
	// A request that fails is something seen, not the end of the test: a
	// gateway may be slow to answer while its cluster elects new leaders.
	get := func(path string) *Response {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		r, err := c.Send(ctx, http.MethodGet, path, nil)
		if err != nil {
			return &Response{Status: -1, Body: []byte(err.Error())}
		}
		return r
	}
	downOf := func(active, all []string) map[string]bool {
		down := map[string]bool{}
		for _, n := range all {
			if !slices.Contains(active, n) {
				down[n] = true
			}
		}
		return down
	}
	var doc struct {
		ActiveNodes []string `json:"active_nodes"`
		AllNodes    []string `json:"all_nodes"`
	}
	if r := get("/stats?stats=false"); r.Status != http.StatusOK || json.Unmarshal(r.Body, &doc) != nil {
		problems = append(problems, "stats: "+r.String())
	} else {
		v["stats"] = nodeView{downOf(doc.ActiveNodes, doc.AllNodes), time.Now()}
	}
	doc.ActiveNodes, doc.AllNodes = nil, nil
	if r := get("/ui/api/cluster"); r.Status != http.StatusOK || json.Unmarshal(r.Body, &doc) != nil {
		problems = append(problems, "cluster page: "+r.String())
	} else {
		v["cluster page"] = nodeView{downOf(doc.ActiveNodes, doc.AllNodes), time.Now()}
	}
	// The detail comes with 503 too: a gateway is unready for the seconds
	// an election takes when the node lost led the metadata.
	if r := get("/readyz?verbose"); r.Status != http.StatusOK && r.Status != http.StatusServiceUnavailable {
		problems = append(problems, "readyz: "+r.String())
	} else {
		down := map[string]bool{}
		for _, line := range strings.Split(string(r.Body), "\n") {
			if name, ok := strings.CutSuffix(strings.TrimPrefix(line, "node "), ": down"); ok && strings.HasPrefix(line, "node ") {
				down[name] = true
			}
		}
		if strings.Contains(string(r.Body), "\nnode ") {
			v["readyz"] = nodeView{down, time.Now()}
		} else {
			problems = append(problems, "readyz lists no node: "+string(r.Body))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, gatewayBinary, "status", "--http", g.HTTP)
	cmd.Env = opsEnv()
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		problems = append(problems, fmt.Sprintf("status: %v: %s", err, out))
	}
	down := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "Down:"); ok {
			for _, n := range strings.Split(rest, ",") {
				down[strings.TrimSpace(n)] = true
			}
		}
	}
	if err == nil && strings.Contains(out, "All nodes:") {
		v["status"] = nodeView{down, time.Now()}
	}
	return v, strings.Join(problems, "; ")
}

// awaitNodes polls the gateways (all at once) until every view of each says
// exactly wantDown is down, and returns for each view how long after since
// the last of the gateways gave the answer that then stayed right (the
// answer's arrival, so a slow answer counts in full).
func awaitNodes(t *testing.T, what string, gws []*Gateway, wantDown []string, since time.Time) map[string]time.Duration {
	t.Helper()
	views := []string{"stats", "cluster page", "readyz", "status"}
	rightSince := make([]map[string]time.Time, len(gws))
	for i := range rightSince {
		rightSince[i] = map[string]time.Time{}
	}
	var last string
	ok := testwait.Until(nodeDownDeadline, func() bool {
		answers := make([]nodeViews, len(gws))
		problems := make([]string, len(gws))
		var wg sync.WaitGroup
		for i, g := range gws {
			wg.Go(func() { answers[i], problems[i] = nodeViewsOf(t, g) })
		}
		wg.Wait()
		done := true
		var seen []string
		for i := range gws {
			if problems[i] != "" {
				seen = append(seen, fmt.Sprintf("gateway %d: %s", i, problems[i]))
			}
			for _, view := range views {
				a, answered := answers[i][view]
				got := slices.Sorted(maps.Keys(a.down))
				if answered && slices.Equal(got, wantDown) {
					if _, ok := rightSince[i][view]; !ok {
						rightSince[i][view] = a.at
					}
					continue
				}
				delete(rightSince[i], view)
				done = false
				seen = append(seen, fmt.Sprintf("gateway %d %s: down %v", i, view, got))
			}
		}
		last = strings.Join(seen, "; ")
		return done
	})
	if !ok {
		t.Fatalf("%s: not within %v; last seen: %s", what, nodeDownDeadline, last)
	}
	took := map[string]time.Duration{}
	for _, view := range views {
		for i := range gws {
			took[view] = max(took[view], rightSince[i][view].Sub(since).Round(time.Millisecond))
		}
	}
	return took
}

func TestClusterNodeDownShown(t *testing.T) {
	heavy(t, "a cluster")
	t.Parallel()
	nodes := StartEmbeddedCluster(t, 3, "--replicas", "3")
	// Streams on every node, so that their leaders have a say too.
	roundTrip(t, newRR(t, nodes...), "nodedown/q", "x", clusterSettle)
	awaitNodes(t, "every node up", nodes, nil, time.Now())

	// kill -9: the node's connections close with it.
	victim, survivors := nodes[2], nodes[:2]
	killed := time.Now()
	victim.Kill()
	took := awaitNodes(t, "the killed node shown down", survivors, []string{nodeName(2)}, killed)
	t.Logf("after kill -9 of %s: shown down after %v", nodeName(2), took)

	victim.Restart()
	back := time.Now()
	took = awaitNodes(t, "the restarted node shown up", nodes, nil, back)
	t.Logf("restarted %s: shown up after %v", nodeName(2), took)

	// SIGSTOP: the node's connections stay open but nothing answers on
	// them, as with a machine that vanished from the network.
	frozen, others := nodes[1], []*Gateway{nodes[0], nodes[2]}
	pid := frozen.PID()
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) // before the cleanup's SIGTERM
	stopped := time.Now()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	took = awaitNodes(t, "the frozen node shown down", others, []string{nodeName(1)}, stopped)
	t.Logf("after SIGSTOP of %s: shown down after %v", nodeName(1), took)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	took = awaitNodes(t, "the resumed node shown up", nodes, nil, resumed)
	t.Logf("resumed %s: shown up after %v", nodeName(1), took)
}
