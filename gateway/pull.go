package gateway

import (
	"context"
	"regexp"
	"time"
)

// Pull hands out the queue's next available message, creating the queue if
// needed. wait < 0 waits until a message comes or ctx ends; wait == 0 does not
// wait. It returns (nil, nil) when no message came in time.
func (g *Messages) Pull(ctx context.Context, queue string, wait time.Duration) (*Delivery, error) {
	release, err := g.waitSlot(ctx, wait, queue)
	if err != nil {
		return nil, err
	}
	defer release()
	r, err := g.disp.Pull(ctx, queue, wait)
	if r == nil || err != nil {
		return nil, err
	}
	return g.deliver(ctx, r)
}

// PullAny is Pull over every queue of scope (nil: all) whose name matches
// re, including queues created while it waits. Queues
// are not created by it.
//
// It never binds every matching queue: with thousands of queues that would
// make a consumer for each. It looks at the queues that have messages
// (the subject counts of their shard streams: a fresh look first, then
// looks shared by every pull-any of this gateway and at most
// RepollInterval/2 old) and tries them one at a time,
// starting at a rotating offset so that busy queues share the pulls fairly;
// probing all at once would take a message from each non-empty queue and
// have to give all but one back. While none has a message it sleeps until a
// notification names a matching queue (tried first) or the next re-poll
// (which also catches messages published by plain NATS programs and
// JetStream's own redeliveries). An idle pull-any thus costs nothing but
// one shared scan per re-poll interval.
func (g *Messages) PullAny(ctx context.Context, re *regexp.Regexp, wait time.Duration, scope Scope) (*Delivery, error) {
	release, err := g.waitSlot(ctx, wait, "pull-any: "+re.String())
	if err != nil {
		return nil, err
	}
	defer release()
	r, err := g.disp.PullAny(ctx, func(name string) bool { return re.MatchString(name) && scope.Allows(name) }, wait)
	if r == nil || err != nil {
		return nil, err
	}
	return g.deliver(ctx, r)
}
