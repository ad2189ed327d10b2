package gateway

import "github.com/lmq-gateway/lmq-gateway/gateway/dispatch"

// DispatchSignals is g's dispatcher's test signals, for the tests of
// package gateway_test (internal/testsignal).
func DispatchSignals(g *Gateway) *dispatch.Signals { return &g.disp.TestSignals }
