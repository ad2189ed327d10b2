package registry

import (
	"github.com/lmq-gateway/lmq-gateway/internal/testsignal"
	"github.com/lmq-gateway/lmq-gateway/store/kv"
)

// TestApplied is the signal of the registry's follower (kvfollow): each
// entry of the bucket applied, for a test to wait on (internal/testsignal).
func (r *Registry) TestApplied() *testsignal.Signal[kv.Entry] { return &r.f.TestApplied }
