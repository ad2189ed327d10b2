// Package kvfollow mirrors a KV bucket (a *kv.KV) in memory from Start
// to Stop (the lifecycle.Service contract): it replays the bucket's current
// values, then applies every change made by any gateway, and skips the late
// echoes of the owner's own writes (ownwrites.go). The core's bucket mirrors (the queue
// registry, the properties, the access tokens) are built on it; opening a
// bucket is package kv's (store/kv: kv.Open, store.Store.OpenKV).
package kvfollow

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/testsignal"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// replayTimeout bounds a replay after a lost watch: the core's bound on one
// JetStream operation (gateway's opTimeout).
const replayTimeout = 10 * time.Second

// Follower mirrors a KV bucket. Should the watch end by itself (a NATS
// reconnect to a server that lost the watch, say), a new one replaces it
// after a replay: a gateway must not go on with a mirror it no longer hears
// about.
type Follower struct {
	kv   *kv.KV
	log  *slog.Logger
	what string
	// apply takes one entry (a put, or a delete/purge marker).
	apply func(kv.Entry)
	// replayed runs at the end of each replay with the keys that hold a
	// value now, so that the mirror can forget what the bucket lost.
	replayed func(present map[string]bool)
	cancel   context.CancelFunc // set by Start: ends the follow
	done     chan struct{}      // closed when the follow ended

	mu      sync.Mutex
	applied uint64          // the revision of the last entry seen
	marks   map[string]mark // own writes not yet echoed (ownwrites.go)

	// TestApplied reports each entry applied (not the skipped echoes),
	// once apply returned, to a test that turned it on
	// (internal/testsignal); off otherwise.
	TestApplied testsignal.Signal[kv.Entry]
}

// New returns a follower of kv; nothing happens until Start. what names
// the bucket in errors and logs; apply takes every entry, replayed (may be
// nil) the keys present at the end of each replay.
func New(kv *kv.KV, log *slog.Logger, what string,
	apply func(kv.Entry), replayed func(present map[string]bool)) *Follower {
	return &Follower{kv: kv, log: log, what: what, apply: apply, replayed: replayed,
		marks: make(map[string]mark)}
}

// Start replays the bucket (ctx bounds the wait) and follows it on a
// goroutine of its own until Stop (lifecycle.Service). On failure nothing
// is left running.
func (f *Follower) Start(ctx context.Context) error {
	wctx, cancel := context.WithCancel(context.Background())
	w, err := f.replay(ctx, wctx)
	if err != nil {
		cancel()
		return err
	}
	f.cancel, f.done = cancel, make(chan struct{})
	go f.follow(wctx, w)
	return nil
}

func (f *Follower) replay(ctx, wctx context.Context) (*kv.Watcher, error) {
	w, err := f.kv.Watch(wctx)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", f.what, err)
	}
	present := make(map[string]bool)
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("%s watcher closed", f.what)
			}
			if e == nil { // the end of the current values
				if f.replayed != nil {
					f.replayed(present)
				}
				return w, nil
			}
			if e.Op == kv.OpPut {
				present[e.Key] = true
			} else {
				delete(present, e.Key)
			}
			f.Offer(*e)
		case <-ctx.Done():
			w.Stop()
			return nil, fmt.Errorf("load %s: %w", f.what, ctx.Err())
		}
	}
}

func (f *Follower) follow(wctx context.Context, w *kv.Watcher) {
	defer close(f.done)
	for {
		for e := range w.Updates() {
			if e != nil {
				f.Offer(*e)
			}
		}
		w.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-time.After(time.Second):
			}
			rctx, cancel := context.WithTimeout(wctx, replayTimeout)
			nw, err := f.replay(rctx, wctx)
			cancel()
			if err == nil {
				w = nw
				break
			}
			f.log.Warn(f.what+" watch lost; retrying", "err", err)
		}
	}
}

// Offer applies e as the watcher does with every entry: unless it is the
// late echo of an entry older than an own write of its key (ownwrites.go).
// Tests call it to hand over such an echo at the worst moment.
func (f *Follower) Offer(e kv.Entry) {
	if !f.skip(e) {
		f.apply(e)
		f.TestApplied.Signal(e)
	}
}

// Pending is the number of own writes not echoed yet: 0 once the follower
// caught up with this gateway's writes.
func (f *Follower) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.marks)
}

// Stop ends the follower and waits for its goroutine (lifecycle.Service);
// nothing to do when it never started.
func (f *Follower) Stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	<-f.done
}
