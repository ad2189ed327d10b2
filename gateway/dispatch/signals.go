package dispatch

import "github.com/lmq-gateway/lmq-gateway/internal/testsignal"

// Signals are the dispatcher's events that a test may wait for instead of
// polling or sleeping (internal/testsignal). They are off, at the cost of a
// nil check each, unless a test turns one on (Init, at any time).
type Signals struct {
	// PullIssued: a pull request for the queue (its name) was sent to
	// JetStream.
	PullIssued testsignal.Signal[string]
	// WaiterParked: a client's pull registered on the queue and waits for
	// a message (also a no-wait one, which waits for its pull request's
	// answer).
	WaiterParked testsignal.Signal[Parked]
	// WaiterWoken: a pulled message of the queue (its name) was handed to
	// a waiting client.
	WaiterWoken testsignal.Signal[string]
	// Notified: another gateway's notification of a new message of the
	// queue (its encoded name) was applied here.
	Notified testsignal.Signal[string]
	// PullAnyParked: a pull-any has looked at every queue it had to (how
	// many it tried) and sleeps until a notification or the next re-poll.
	PullAnyParked testsignal.Signal[int]
}

// Parked is a waiter's registration on a queue (Signals.WaiterParked).
type Parked struct {
	Queue  string
	NoWait bool
}
