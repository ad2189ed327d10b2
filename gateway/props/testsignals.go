package props

import (
	"github.com/lmq-gateway/lmq-gateway/internal/testsignal"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// TestApplied is the signal of the cache's follower (kvfollow): each
// entry of the bucket applied, for a test to wait on (internal/testsignal).
func (c *Cache) TestApplied() *testsignal.Signal[kv.Entry] { return &c.f.TestApplied }
