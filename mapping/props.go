package mapping

import (
	"errors"
	"regexp"
	"time"
)

// System defaults of the LMQ properties.
const (
	DefaultAccum   = 0.0
	DefaultRetry   = 2
	DefaultTimeout = 30.0
)

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
}

// Effective are the properties in force for a queue.
type Effective struct {
	Accum   float64
	Retry   int
	Timeout float64
	Hooks   Hooks
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

// TimeoutDuration converts the timeout property to a duration.
func (e Effective) TimeoutDuration() time.Duration { return secondsToDuration(e.Timeout) }

func secondsToDuration(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}
