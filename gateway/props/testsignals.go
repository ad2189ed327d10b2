package props

import (
	"github.com/lmq-gateway/lmq-gateway/internal/testsignal"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// TestApplied is the signal of the cache's follower (kvfollow): each
// entry of the bucket applied, for a test to wait on (internal/testsignal).
func (c *Cache) TestApplied() *testsignal.Signal[store.KVEntry] { return &c.f.TestApplied }
