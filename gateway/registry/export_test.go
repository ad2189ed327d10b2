package registry

import "github.com/lmq-gateway/lmq-gateway/internal/kvfollow"

// Follower is r's follower of the registry bucket, for the tests of
// package registry_test (its TestApplied signal).
func Follower(r *Registry) *kvfollow.Follower { return r.f }
