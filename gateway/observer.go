package gateway

import "time"

// Observer receives the core's events, for statistics and metrics. Methods are
// called on hot paths and must not block.
type Observer interface {
	// Pushed: a message (or a part) of size bytes was stored in queue.
	Pushed(queue string, bytes int)
	// Pulled: a message was handed to a client, retention after its push.
	Pulled(queue string, retention time.Duration)
	// Replied: a client's reply took effect.
	Replied(queue string, kind ReplyKind)
	// TimedOut: a delivery's timeout expired and the message went back.
	TimedOut(queue string)
	// Discarded: a message's retries were used up and it was dropped.
	Discarded(queue string)
}

type nopObserver struct{}

func (nopObserver) Pushed(string, int)           {}
func (nopObserver) Pulled(string, time.Duration) {}
func (nopObserver) Replied(string, ReplyKind)    {}
func (nopObserver) TimedOut(string)              {}
func (nopObserver) Discarded(string)             {}
