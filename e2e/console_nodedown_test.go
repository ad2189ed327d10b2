package e2e

import (
	"fmt"
	"testing"
)

// TestConsoleClusterNodeDown: in a 3-node embedded cluster, the cluster page
// of a surviving gateway shows a node killed with kill -9 as down (the
// screenshot docs/console-cluster-node-down.png).
func TestConsoleClusterNodeDown(t *testing.T) {
	heavy(t, "a cluster and a browser")
	t.Parallel()
	nodes := StartEmbeddedCluster(t, 3, "--replicas", "3")
	roundTrip(t, newRR(t, nodes...), "nodedown/console", "x", clusterSettle)
	// A queue kept on all three nodes: its stream turns degraded.
	nodes[0].Client(t).Push("nodedown/orders", []byte("x"), "text/plain")
	b := newBrowser(t, nodes[0].HTTP)

	down := nodeName(2)
	b.open("#/cluster")
	b.waitJS("three nodes up", `document.querySelectorAll('#nodes li .badge.ok').length === 3`)
	nodes[2].Kill()
	// The page refreshes by itself: the killed node turns "down".
	b.waitJS(down+" shown down", fmt.Sprintf(`Array.from(document.querySelectorAll('#nodes li')).some(li => li.textContent.startsWith(%s) && li.querySelector('.badge.bad') && li.querySelector('.badge.bad').textContent === 'down')`, jsString(down+" ")))
	b.waitJS("the stream degraded", `document.querySelector('#streams tbody').textContent.includes('degraded')`)
	b.screenshot("cluster-node-down")
	b.labelled("cluster")
	b.noErrors()
}
