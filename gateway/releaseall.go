package gateway

import "context"

// ReleaseAll gives back every delivery this gateway still holds, for a
// shutdown after the front ends have stopped: without it those messages stay
// pending in JetStream until the consumer's AckWait backstop (the queue's
// timeout and more), while released they are available at once to other
// gateways or after a restart. Like Abandon, the release does not count as a
// retry, so no message is dropped for it; a client that did get the message
// and could not answer may see it again. It returns the number released and
// stops early when ctx ends.
func (g *Messages) ReleaseAll(ctx context.Context) int {
	n := 0
	for _, d := range g.dels.All() {
		if ctx.Err() != nil {
			break
		}
		if g.take(d) {
			g.rel.Release(d.Raw, false)
			n++
		}
	}
	return n
}
