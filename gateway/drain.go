package gateway

// StopWaiting is the first step of a graceful shutdown: every pull waiting
// for a message answers empty now (204 over HTTP, "empty" over RPC), and
// every later one at once, so that the front ends can drain. Nothing else
// stops: pushes, deliveries and replies keep working, replies relayed from
// other gateways included, so that an ack sent through another gateway
// during the drain still reaches a delivery this gateway holds. The shutdown
// then releases the deliveries nobody answered (ReleaseAll) and calls Close,
// which calls StopWaiting too when the shutdown skipped it.
func (g *Gateway) StopWaiting() { g.stopWait.Do(func() { close(g.closing) }) }
