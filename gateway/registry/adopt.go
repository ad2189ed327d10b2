package registry

import "context"

// adopt registers the queues that have messages in the shard streams but
// no registry key: pushed by a gateway that had not yet seen the queue
// deleted, or published by a NATS program straight into a new queue's
// subject. A message is never left where no client can reach it. The shard
// streams themselves are package store's (store/shards.go).
func (r *Registry) adopt(ctx context.Context) error {
	queues, err := r.cfg.Store.Shards().StoredQueues(ctx)
	if err != nil {
		return err
	}
	for _, name := range queues {
		if r.Known(name) {
			continue
		}
		r.cfg.Logger.Info("registering a queue that has messages but no registry key", "queue", name)
		if err := r.Register(ctx, name); err != nil {
			return err
		}
	}
	return nil
}
