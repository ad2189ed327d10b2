package upgrade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// closeJobs are the accumulator's close jobs (windows whose close was under
// way when the old gateway stopped), read once per upgrade: the keys by
// encoded queue name.
type closeJobs struct {
	kv   *kv.KV
	keys map[string][]string
}

// readCloseJobs lists the close jobs of mapping.AccumBucket (nil when the
// bucket does not exist).
func (u *upgrader) readCloseJobs(ctx context.Context) (*closeJobs, error) {
	lctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	bkt, err := kv.Open(lctx, u.js, kv.Config{Bucket: mapping.AccumBucket, Create: kv.Existing})
	if errors.Is(err, kv.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("accumulation bucket: %w", err)
	}
	keys, err := bkt.Keys(lctx, "j.>")
	if err != nil {
		return nil, fmt.Errorf("list close jobs: %w", err)
	}
	out := &closeJobs{kv: bkt, keys: make(map[string][]string)}
	for _, k := range keys {
		if enc, _, ok := strings.Cut(strings.TrimPrefix(k, "j."), "."); ok {
			out.keys[enc] = append(out.keys[enc], k)
		}
	}
	return out, nil
}

// fix fixes the queue's close jobs, whose cut and LQ are sequences of the
// old stream. Every part of the queue is in the shard now and no push can
// have come since (nothing is served during the upgrade), so the cut
// becomes the shard's last sequence and LQ 0 (the search for an earlier
// compound then starts at the beginning). A part that a dead push left past
// the old cut joins the window (it was never pushed again).
func (jobs *closeJobs) fix(ctx context.Context, log *slog.Logger, queue string, shard jetstream.Stream) error {
	if jobs == nil || len(jobs.keys[mapping.EncodeName(queue)]) == 0 {
		return nil
	}
	bkt := jobs.kv
	info, err := shard.Info(ctx)
	if err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	for _, k := range jobs.keys[mapping.EncodeName(queue)] {
		e, err := bkt.Get(ctx, k)
		if errors.Is(err, kv.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("close job %s: %w", k, err)
		}
		var j map[string]json.RawMessage
		if err := json.Unmarshal(e.Value, &j); err != nil {
			log.Warn("ignoring an unreadable close job", "key", k, "err", err)
			continue
		}
		if _, ok := j["cut"]; !ok {
			continue // the close fixes its cut from the shard itself
		}
		j["cut"] = json.RawMessage(strconv.FormatUint(info.State.LastSeq, 10))
		delete(j, "lq")
		b, err := json.Marshal(j)
		if err != nil {
			return fmt.Errorf("close job %s: %w", k, err)
		}
		if _, err := bkt.Update(ctx, k, b, e.Revision); err != nil {
			return fmt.Errorf("close job %s: %w", k, err)
		}
	}
	return nil
}
