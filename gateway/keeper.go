package gateway

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// Keeper: why a shard that takes pushes holds a message no client sees
// (issue 19).
//
// JetStream's file store deletes a message block as soon as its last
// message is removed (fileStore.removeMsgFromBlock calls removeMsgBlock when
// the block's count reaches zero, server/filestore.go in nats-server
// 2.15). When that block is the one being written, removeMsgBlock first
// rolls to a new one (newMsgBlockForWrite: flush, create and open a new .blk
// file, a hash key, a write cache and a flush goroutine), writes a tombstone
// there to remember the last sequence, then closes and unlinks the old
// file. A work queue whose consumers keep up is emptied by the ack of nearly
// every message, so at a steady 2,000 msg/s the store made and deleted a
// block file every two messages or so (~12% of the gateway's CPU in a
// profile). No stream or server option avoids that: the block size only
// bounds how full a block gets, S2 compression recompresses every rolled
// block (raw test: 300 against 197 µs/msg), SyncInterval and SyncAlways act
// on flushing only.
//
// What does is a message nobody consumes in the block being written: that
// block then never becomes empty, an ack only appends a tombstone to it, and
// blocks are replaced only when full. So a gateway that pushed into a shard
// publishes the shard's keeper (lmq.keep.<kk>) with a subject rollup, which
// leaves exactly one, at most once per keeperInterval: the keeper is back in
// the block being written within a second after the store moved on to a new
// block. Raw JetStream at 2,000 msg/s: 5,900-11,300 block files made per
// 20,000 messages without, 119-616 with; CPU per message -25% (BENCHMARKS.md).
//
// It is driven by pushes, not by a timer: a shard nobody pushes into gets no
// keeper writes, so an idle gateway stores nothing, its shards' last
// sequences stand still and the pull-any scan can tell them unchanged
// (scan.go). Several gateways each republish the keeper of the shards they
// push into; the rollup keeps one. The subject has three tokens, queue
// subjects four or five (mapping.ParseSubject rejects it), so no queue
// consumer, listing, purge or count sees it; only the whole stream's
// message count includes it. A keeper that cannot be written is only
// churn: logged, the push itself is unaffected.
type keeper struct {
	touched [mapping.ShardCount]atomic.Bool
	wake    chan struct{} // one pending wake-up of the loop
}

// keeperInterval is the longest a shard being pushed into goes without a
// keeper in its block being written, and the most often it gets one.
const keeperInterval = time.Second

// keeperBytes is about what a keeper takes in the stream (JetStream's 30
// bytes of record, subject, rollup header), left out of the per-queue byte
// estimate.
const keeperBytes = 72

func newKeeper() *keeper { return &keeper{wake: make(chan struct{}, 1)} }

// touch notes a push into shard k: one atomic load on the hot path once the
// shard is marked.
func (kp *keeper) touch(k int) {
	if kp.touched[k].Load() {
		return
	}
	kp.touched[k].Store(true)
	select {
	case kp.wake <- struct{}{}:
	default:
	}
}

// keeperSubject is where shard k's keeper lives (lmq.keep.<kk>).
func keeperSubject(k int) string {
	return mapping.SubjectPrefix + ".keep." + strings.TrimPrefix(mapping.ShardStream(k), mapping.ShardStreamPrefix)
}

// keeperLoop publishes the keepers of the shards pushed into since its last
// round, at most one round per keeperInterval; it sleeps while nothing is
// pushed.
func (g *Gateway) keeperLoop() {
	defer g.bg.Done()
	kp := g.keep
	for {
		select {
		case <-g.closing:
			return
		case <-kp.wake:
		}
		for k := range kp.touched {
			if kp.touched[k].Swap(false) {
				g.publishKeeper(k)
			}
		}
		select {
		case <-g.closing:
			return
		case <-time.After(keeperInterval):
		}
	}
}

func (g *Gateway) publishKeeper(k int) {
	g.within(func(life context.Context) {
		ctx, cancel := context.WithTimeout(life, opTimeout)
		defer cancel()
		m := &nats.Msg{Subject: keeperSubject(k), Header: nats.Header{"Nats-Rollup": []string{"sub"}}}
		if _, err := g.js.PublishMsg(ctx, m); err != nil {
			if n, ok := g.noise.allow("shard keeper not written"); ok {
				g.log.Warn("shard keeper not written; the shard works, with more disk churn", "stream", mapping.ShardStream(k), "err", err, "suppressed", n)
			}
		}
	})
}
