package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// kvFollower mirrors a KV bucket in memory for as long as the gateway lives:
// it replays the bucket's current values, then applies every change made by
// any gateway. Should the watch end by itself (a NATS reconnect to a server
// that lost the watch, say), a new one replaces it after a replay: a gateway
// must not go on with a mirror it no longer hears about.
type kvFollower struct {
	kv   jetstream.KeyValue
	log  *slog.Logger
	what string
	// apply takes one entry (a put, or a delete/purge marker).
	apply func(jetstream.KeyValueEntry)
	// replayed runs at the end of each replay with the keys that hold a
	// value now, so that the mirror can forget what the bucket lost.
	replayed func(present map[string]bool)
	cancel   context.CancelFunc
	done     chan struct{}

	mu      sync.Mutex
	applied uint64          // the revision of the last entry seen
	marks   map[string]mark // own writes not yet echoed (ownwrites.go)
}

// followBucket replays kv (ctx bounds the wait) and follows it until stop or
// until life (the gateway's lifetime) ends.
func followBucket(ctx, life context.Context, kv jetstream.KeyValue, log *slog.Logger, what string,
	apply func(jetstream.KeyValueEntry), replayed func(map[string]bool)) (*kvFollower, error) {
	wctx, cancel := context.WithCancel(life)
	f := &kvFollower{kv: kv, log: log, what: what, apply: apply, replayed: replayed, cancel: cancel, done: make(chan struct{}),
		marks: make(map[string]mark)}
	w, err := f.replay(ctx, wctx)
	if err != nil {
		cancel()
		return nil, err
	}
	go f.follow(wctx, w)
	return f, nil
}

func (f *kvFollower) replay(ctx, wctx context.Context) (jetstream.KeyWatcher, error) {
	w, err := f.kv.WatchAll(wctx)
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
			if e.Operation() == jetstream.KeyValuePut {
				present[e.Key()] = true
			} else {
				delete(present, e.Key())
			}
			if !f.skip(e) {
				f.apply(e)
			}
		case <-ctx.Done():
			_ = w.Stop()
			return nil, fmt.Errorf("load %s: %w", f.what, ctx.Err())
		}
	}
}

func (f *kvFollower) follow(wctx context.Context, w jetstream.KeyWatcher) {
	defer close(f.done)
	for {
		for e := range w.Updates() {
			if e != nil && !f.skip(e) {
				f.apply(e)
			}
		}
		_ = w.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-time.After(time.Second):
			}
			rctx, cancel := context.WithTimeout(wctx, opTimeout)
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

// stop ends the follower and waits for it.
func (f *kvFollower) stop() {
	f.cancel()
	<-f.done
}

// followBucket is the package's followBucket for the gateway's lifetime:
// Close stops the follower and waits for it.
func (g *Gateway) followBucket(ctx context.Context, kv jetstream.KeyValue, what string,
	apply func(jetstream.KeyValueEntry), replayed func(map[string]bool)) (*kvFollower, error) {
	f, err := followBucket(ctx, g.work.ctx, kv, g.log, what, apply, replayed)
	if err != nil {
		return nil, err
	}
	g.followMu.Lock()
	g.followers = append(g.followers, f)
	g.followMu.Unlock()
	return f, nil
}

// stopFollowers stops every follower started by Gateway.followBucket.
func (g *Gateway) stopFollowers() {
	g.followMu.Lock()
	fs := g.followers
	g.followers = nil
	g.followMu.Unlock()
	for _, f := range fs {
		f.stop()
	}
}

// openBucket opens a KV bucket shared by every gateway, creating it when it
// does not exist yet. It is created once, with the creator's replicas, and
// never updated, so that a gateway started with another count does not
// rescale it under the others (an R1 bucket dies with its one server).
func (g *Gateway) openBucket(ctx context.Context, name, description string) (jetstream.KeyValue, error) {
	kv, err := g.js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = g.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      name,
			Description: description,
			History:     1,
			Replicas:    g.cfg.Replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = g.js.KeyValue(ctx, name) // another gateway was first
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", name, err)
	}
	return kv, nil
}
