package console

import (
	"cmp"
	"net/http"
	"slices"
	"strings"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// waitLister is the part of the core that lists the pulls waiting now;
// *gateway.Inspect implements it (a core without it lists none).
type waitLister interface {
	WaitingClients() ([]gateway.WaitingPull, map[string]int)
}

var _ waitLister = (*gateway.Inspect)(nil)

// Clients is the answer of GET /ui/api/clients: who is pulling from this
// gateway now.
type Clients struct {
	// Gateway is this gateway's id: the lists are its own.
	Gateway string `json:"gateway"`
	// Waiting counts the pulls waiting for a message now (long polls of
	// HTTP, RPC and SQS), by client kind.
	Waiting map[string]int `json:"waiting"`
	// Pulls are those pulls, longest waiting first (at most
	// gateway.MaxListedPulls).
	Pulls []gateway.WaitingPull `json:"pulls"`
	// RPC is the MessagePack-RPC connections open now, by client address
	// (most connections first); null without an RPC server.
	RPC []AddrCount `json:"rpc"`
}

// AddrCount is a number of connections from one address.
type AddrCount struct {
	Addr  string `json:"addr"`
	Conns int    `json:"conns"`
}

func (c *Console) serveClients(w http.ResponseWriter, r *http.Request) {
	out := Clients{Gateway: c.core.Gateway.ID(), Waiting: map[string]int{}, Pulls: []gateway.WaitingPull{}}
	if wl, ok := c.core.Inspect.(waitLister); ok {
		out.Pulls, out.Waiting = wl.WaitingClients()
	}
	if conns := c.rpcConns(); conns != nil {
		out.RPC = []AddrCount{}
		for addr, n := range conns {
			out.RPC = append(out.RPC, AddrCount{Addr: addr, Conns: n})
		}
		slices.SortFunc(out.RPC, func(a, b AddrCount) int {
			return cmp.Or(cmp.Compare(b.Conns, a.Conns), strings.Compare(a.Addr, b.Addr))
		})
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *Console) rpcConns() map[string]int {
	if c.opt.RPCConns == nil {
		return nil
	}
	return c.opt.RPCConns()
}
