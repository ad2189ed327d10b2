package gateway

import "github.com/lmq-gateway/lmq-gateway/gateway/pushopt"

// The push options' names, the same in every protocol that has them: HTTP's
// query parameters (the key is the Idempotency-Key header there) and the
// keys of RPC push's option map (package pushopt).
const (
	OptDelay          = pushopt.Delay
	OptTTL            = pushopt.TTL
	OptPriority       = pushopt.Priority
	OptGroup          = pushopt.Group
	OptIdempotencyKey = pushopt.IdempotencyKey
)

// PushOptionNames lists the push options, for a refusal of an unknown one.
const PushOptionNames = pushopt.Names

// IsPushOption reports whether name is a push option.
func IsPushOption(name string) bool { return pushopt.Is(name) }
