package dispatch

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
func (l *locals) withMessages(ctx context.Context, w *anyWaiter, maxAge time.Duration) ([]string, error) {
	seen := make(map[int]bool)
	var shards []int
	for _, name := range l.reg.Matching(w.matches) {
		if k := mapping.Shard(name); !seen[k] {
			seen[k] = true
			shards = append(shards, k)
		}
	}
	counts, err := l.d.store.Shards().QueueCounts(ctx, shards, maxAge)
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

func (l *locals) addAny(w *anyWaiter) {
	l.mu.Lock()
	l.anyWait[w] = struct{}{}
	l.anyCount.Add(1)
	l.mu.Unlock()
}

func (l *locals) removeAny(w *anyWaiter) {
	l.mu.Lock()
	if _, ok := l.anyWait[w]; ok {
		delete(l.anyWait, w)
		l.anyCount.Add(-1)
	}
	l.mu.Unlock()
}

// notifyAny tells the waiting pull-anys that the queue (by encoded name)
// has a message. Without any waiting it costs one atomic load.
// wakeAllAny wakes every waiting pull-any to look at all its queues again
// (a property change may have resumed any of them).
func (l *locals) wakeAllAny() {
	if l.anyCount.Load() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for w := range l.anyWait {
		w.mu.Lock()
		w.overflow = true
		w.mu.Unlock()
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

func (l *locals) notifyAny(enc string) {
	if l.anyCount.Load() == 0 {
		return
	}
	name, ok := l.reg.Name(enc)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for w := range l.anyWait {
		w.hit(name)
	}
}
