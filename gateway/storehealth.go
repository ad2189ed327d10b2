package gateway

import "context"

// StoreFailure is the last storage failure a store of this gateway met (a
// full disk, a JetStream limit), or the NATS server's standing one
// (Config.StoreHealth); nil once a store succeeded since, or some seconds
// after the last failure. Readiness reports it.
func (g *Gateway) StoreFailure() error { return g.store.Failure() }

// StoreFailures counts stores that failed for want of storage.
func (g *Gateway) StoreFailures() uint64 { return g.store.Failures() }

// ProbeStore checks that JetStream answers and stores: it writes this
// gateway's key in the small KV bucket mapping.HealthBucket (created on first
// use, with the queues' replicas; keys expire after an hour) and reads it
// back. Readiness calls it.
func (g *Gateway) ProbeStore(ctx context.Context) error { return g.store.Probe(ctx, "gw."+g.id) }
