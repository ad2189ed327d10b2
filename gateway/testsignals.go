package gateway

import (
	"github.com/lmq-gateway/lmq-gateway/gateway/dispatch"
	"github.com/lmq-gateway/lmq-gateway/internal/testsignal"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// TestSignals are the events of a core's parts that a test may wait for
// instead of polling for their effects (internal/testsignal): a test of
// any package turns one on (Init) before it causes the event. Nothing else
// uses them; off, each costs a nil check where it fires.
type TestSignals struct {
	// Dispatch is the dispatcher's: a pull request issued, a pull
	// waiting, a waiting pull handed a message, a pull-any asleep.
	Dispatch *dispatch.Signals
	// PeerHeard: a hello ('H') or bye ('B') of another gateway applied to
	// the peers this core knows.
	PeerHeard *testsignal.Signal[byte]
	// PropsApplied and QueuesApplied: an entry of the properties bucket,
	// of the queue registry's bucket, applied by its follower here (a
	// change made through any gateway).
	PropsApplied, QueuesApplied *testsignal.Signal[kv.Entry]
	// TimedOut: a delivery of this core whose timeout fired, done with:
	// its message given back to its queue (or dead-lettered or dropped,
	// its retries used up) and the delivery out of InFlight. A delivery
	// answered, abandoned or released before its timeout never fires it.
	TimedOut *testsignal.Signal[TimedOutDelivery]
}

// TimedOutDelivery is the value of TestSignals.TimedOut: the delivery's
// queue and id.
type TimedOutDelivery struct {
	Queue, ID string
}

// Signals is g's TestSignals.
func Signals(g *Gateway) TestSignals {
	return TestSignals{
		Dispatch:      &g.disp.TestSignals,
		PeerHeard:     &g.peers.TestHeard,
		PropsApplied:  g.props.TestApplied(),
		QueuesApplied: g.reg.TestApplied(),
		TimedOut:      &g.testTimedOut,
	}
}
