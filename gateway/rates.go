package gateway

import "github.com/lmq-gateway/lmq-gateway/store/bus"

// ratesSubject carries the gateways' rate samples: every few seconds each
// gateway's console publishes its pushes and pulls of the last interval
// there, and every console sums what it hears into the cluster's rates
// (see package console). Core NATS, no storage: a sample lost is a gap in
// the cluster's chart, nothing more.
const ratesSubject = controlPrefix + "rates"

// PublishRates sends one of this gateway's rate samples to every gateway's
// console.
func (g *Gateway) PublishRates(data []byte) error { return g.bus.Publish(ratesSubject, data) }

// SubscribeRates calls f with the rate samples of every gateway (this one's
// too) until stop is called.
func (g *Gateway) SubscribeRates(f func(data []byte)) (stop func(), err error) {
	sub, err := g.bus.Subscribe(ratesSubject, g.counted(func(m bus.Msg) { f(m.Data) }))
	if err != nil {
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
