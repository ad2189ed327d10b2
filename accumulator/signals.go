package accumulator

import "github.com/lmq-gateway/lmq-gateway/internal/testsignal"

// Signals are the scheduler's events that a test may wait for instead of
// polling or sleeping (internal/testsignal). They are off, at the cost of a
// nil check each, unless a test turns one on (Init, at any time).
type Signals struct {
	// ChangeApplied: the scheduler applied a change of the bucket that its
	// watch brought (a window opened or removed, a close job written or
	// removed): its key.
	ChangeApplied testsignal.Signal[string]
	// WindowClosed: a worker finished with a window (its close, or a check
	// of its close job) and the scheduler took the result.
	WindowClosed testsignal.Signal[Closed]
}

// Closed is what the scheduler knew when a worker finished with a window
// (Signals.WindowClosed).
type Closed struct {
	Window string
	// Retry: the close did not finish and is tried again later.
	Retry bool
	// Running is how many closes still run on workers.
	Running int
}
