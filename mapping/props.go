package mapping

import (
	"errors"
	"maps"
	"math"
	"regexp"
	"slices"
	"time"
)

// System defaults of the LMQ properties.
const (
	DefaultAccum   = 0.0
	DefaultRetry   = 2
	DefaultTimeout = 30.0
)

// MaxRetry is the largest retry value accepted. LMQ had no limit (Erlang
// integers are unbounded), but the gateway computes retry+1 deliveries and
// stores retry in a header, so it must fit an int with room to spare; no real
// client needs two billion redeliveries.
const MaxRetry = math.MaxInt32 - 1

// MaxInflight is the largest max_inflight accepted: JetStream keeps a
// consumer's pending acks in memory, and no queue needs more deliveries in
// flight than this at once.
const MaxInflight = 1_000_000

// HookPointPreHTTPPush is LMQ's only hook point: run on every HTTP push.
const HookPointPreHTTPPush = "pre_http_push"

// HookPreserveHeader is LMQ's only built-in hook: keep named request headers of
// an HTTP push and return them when the message is pulled.
const HookPreserveHeader = "lmq_hook_preserve_header"

// ErrInvalidProps is wrapped by every property validation error.
var ErrInvalidProps = errors.New("invalid properties")

// Hook is one configured hook call: its name and arguments. For
// lmq_hook_preserve_header the argument is the list of header names.
type Hook struct {
	Name string
	Args []string
}

// Hooks maps a hook point ("pre_http_push") to the hooks run there, in order.
type Hooks map[string][]Hook

// Props is a partial set of queue properties: nil fields are not set. It is the
// form of a PATCH body, a queue's own stored properties, and each entry of the
// default-properties list.
type Props struct {
	Accum   *float64 // seconds, kept in whole milliseconds
	Retry   *int
	Timeout *float64 // seconds
	Hooks   Hooks    // nil: not set
	// Beyond LMQ: TTL (seconds a message may wait; 0 = forever) and
	// DeadLetter (keep retry-exhausted messages in the queue's dead letters).
	TTL        *float64
	DeadLetter *bool
	// ReleaseOnDisconnect, beyond LMQ: a delivery handed out over a
	// MessagePack-RPC connection that closes before replying returns to the
	// queue at once, without counting a retry, instead of after the timeout.
	ReleaseOnDisconnect *bool
	// Priority, beyond LMQ: the priority (0..MaxPriority) of pushes to the
	// queue that give none.
	Priority *int
	// Paused, beyond LMQ: pulls do not hand out the queue's messages
	// (pushes are stored, deliveries in flight may be answered).
	Paused *bool
	// MaxInflight, beyond LMQ: at most this many deliveries of the queue
	// in flight at once, across gateways (0..MaxInflight; 0 = no limit).
	MaxInflight *int
	// DeadLetterQueue, beyond LMQ: a message whose retries are used up is
	// moved into this queue as a new message (SQS's redrive policy) instead
	// of being dropped or kept in the queue's own dead letters. "" (set)
	// overrides a default naming one: none.
	DeadLetterQueue *string
}

// Effective are the properties in force for a queue.
type Effective struct {
	Accum      float64
	Retry      int
	Timeout    float64
	Hooks      Hooks
	TTL        float64
	DeadLetter bool
	// ReleaseOnDisconnect: see Props.ReleaseOnDisconnect (default false).
	ReleaseOnDisconnect bool
	// Priority: see Props.Priority (default 0).
	Priority int
	// Paused and MaxInflight: see Props (default false, 0 = no limit).
	Paused      bool
	MaxInflight int
	// DeadLetterQueue: see Props.DeadLetterQueue ("" = none).
	DeadLetterQueue string
}

// DefaultEntry is one entry of the default-properties list.
type DefaultEntry struct {
	Pattern string
	Re      *regexp.Regexp
	Props   Props
}

// DefaultList is the ordered default-properties list [[REGEXP, PROPS], ...].
type DefaultList []DefaultEntry

// AccumDuration converts the accum property to a duration.
func (e Effective) AccumDuration() time.Duration { return secondsToDuration(e.Accum) }

// TTLDuration converts the ttl property to a duration (0: messages do not expire).
func (e Effective) TTLDuration() time.Duration { return secondsToDuration(e.TTL) }

// TimeoutDuration converts the timeout property to a duration.
func (e Effective) TimeoutDuration() time.Duration { return secondsToDuration(e.Timeout) }

// secondsToDuration converts seconds to a duration, clamping instead of
// overflowing: parsed properties are at most MaxSeconds, but an Effective may
// be built by hand, and a float-to-int conversion out of range is
// implementation-defined in Go.
func secondsToDuration(s float64) time.Duration {
	if !(s > 0) { // also catches NaN
		return 0
	}
	ns := s * float64(time.Second)
	if ns >= math.MaxInt64 { // float64(MaxInt64) is 2^63, itself out of range
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// IsZero reports whether no field is set.
func (p Props) IsZero() bool {
	return p.Accum == nil && p.Retry == nil && p.Timeout == nil && p.Hooks == nil && p.TTL == nil && p.DeadLetter == nil &&
		p.ReleaseOnDisconnect == nil && p.Priority == nil && p.Paused == nil && p.MaxInflight == nil &&
		p.DeadLetterQueue == nil
}

// Merge returns p with every field set in patch overriding p's. The result
// shares no memory with either argument, so a stored Props can be merged into
// without the caller worrying about aliasing.
func (p Props) Merge(patch Props) Props {
	hooks := p.Hooks
	if patch.Hooks != nil {
		hooks = patch.Hooks
	}
	return Props{
		Accum:      clonePtr(firstSet(patch.Accum, p.Accum)),
		Retry:      clonePtr(firstSet(patch.Retry, p.Retry)),
		Timeout:    clonePtr(firstSet(patch.Timeout, p.Timeout)),
		Hooks:      hooks.clone(),
		TTL:        clonePtr(firstSet(patch.TTL, p.TTL)),
		DeadLetter: clonePtr(firstSet(patch.DeadLetter, p.DeadLetter)),

		ReleaseOnDisconnect: clonePtr(firstSet(patch.ReleaseOnDisconnect, p.ReleaseOnDisconnect)),
		Priority:            clonePtr(firstSet(patch.Priority, p.Priority)),
		Paused:              clonePtr(firstSet(patch.Paused, p.Paused)),
		MaxInflight:         clonePtr(firstSet(patch.MaxInflight, p.MaxInflight)),
		DeadLetterQueue:     clonePtr(firstSet(patch.DeadLetterQueue, p.DeadLetterQueue)),
	}
}

// firstSet is the first of a and b that is set (non-nil), as cmp.Or is for
// values: a Props field set to its zero value still overrides.
func firstSet[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

// valueOr is *v, or def where v is not set.
func valueOr[T any](v *T, def T) T {
	if v != nil {
		return *v
	}
	return def
}

func clonePtr[T any](v *T) *T {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}

// clone deep-copies h, keeping nil (not set) distinct from empty (set, no hooks).
func (h Hooks) clone() Hooks {
	if h == nil {
		return nil
	}
	out := make(Hooks, len(h))
	for point, hooks := range h {
		c := make([]Hook, len(hooks))
		for i, hk := range hooks {
			c[i] = Hook{Name: hk.Name, Args: slices.Clone(hk.Args)}
		}
		out[point] = c
	}
	return out
}

// PreservedHeaders returns the (lowercase) header names that the
// lmq_hook_preserve_header hooks at pre_http_push keep, in configuration
// order, each once.
func (h Hooks) PreservedHeaders() []string {
	var out []string
	seen := map[string]bool{}
	for _, hk := range h[HookPointPreHTTPPush] {
		if hk.Name != HookPreserveHeader {
			continue
		}
		for _, name := range hk.Args {
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	return out
}

// sortedPoints returns the hook points in the order they are rendered.
func (h Hooks) sortedPoints() []string {
	return slices.Sorted(maps.Keys(h))
}
