package gateway

import (
	"context"
	"sort"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Pull-any's waiters, and the queues matching one that hold messages: the
// look at the shard streams' subject counts, shared and cached, is package
// store's (store/scan.go).

// withMessages returns the queues matching w that hold messages, sorted,
// from looks at their shards started at most maxAge before the call (0:
// after it). It looks at the shards of the matching queues this gateway
// knows; a queue's name comes from its subject (the encoding is
// reversible), so one created a moment ago through another gateway counts
// too if its shard is looked at.
func (r *registry) withMessages(ctx context.Context, w *anyWaiter, maxAge time.Duration) ([]string, error) {
	seen := make(map[int]bool)
	var shards []int
	r.mu.Lock()
	for _, name := range r.known {
		if k := mapping.Shard(name); !seen[k] && w.matches(name) {
			seen[k] = true
			shards = append(shards, k)
		}
	}
	r.mu.Unlock()
	counts, err := r.g.store.QueueCounts(ctx, shards, maxAge)
	if err != nil {
		return nil, err
	}
	var out []string
	for enc := range counts {
		if name, ok := mapping.DecodeName(enc); ok && w.matches(name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (r *registry) addAny(w *anyWaiter) {
	r.mu.Lock()
	r.anyWait[w] = struct{}{}
	r.anyCount.Add(1)
	r.mu.Unlock()
}

func (r *registry) removeAny(w *anyWaiter) {
	r.mu.Lock()
	if _, ok := r.anyWait[w]; ok {
		delete(r.anyWait, w)
		r.anyCount.Add(-1)
	}
	r.mu.Unlock()
}

// notifyAny tells the waiting pull-anys that the queue (by encoded name)
// has a message. Without any waiting it costs one atomic load.
func (r *registry) notifyAny(enc string) {
	if r.anyCount.Load() == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	name, ok := r.known[enc]
	if !ok {
		return
	}
	for w := range r.anyWait {
		w.hit(name)
	}
}
