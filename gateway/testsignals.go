package gateway

import "github.com/lmq-gateway/lmq-gateway/gateway/dispatch"

// DispatchSignals is g's dispatcher's test signals (dispatch.Signals): a
// test of any package turns one on (Init) to wait for the dispatcher's
// events (a pull request issued, a pull waiting, …) instead of polling for
// their effects. Nothing else uses them; off, each costs a nil check.
func DispatchSignals(g *Gateway) *dispatch.Signals { return &g.disp.TestSignals }
