// Package pushopt holds the push options (Options) and their one parser
// and checker: the front ends read them with SetText (HTTP query
// parameters) and SetValue (RPC's option map), the core checks options
// built in Go (the lmq package, SQS) with Check. The ranges are mapping's.
// Package gateway's PushOptions is Options, and its OptDelay… are these
// names.
package pushopt

import (
	"errors"
	"fmt"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// The push options' names, the same in every protocol that has them: HTTP's
// query parameters (the key is the Idempotency-Key header there) and the
// keys of RPC push's option map.
const (
	Delay          = "delay"
	TTL            = "ttl"
	Priority       = "priority"
	Group          = "group"
	IdempotencyKey = "idempotency_key"
)

// Names lists the push options, for a refusal of an unknown one.
const Names = "delay, ttl, idempotency_key, priority, group"

// Is reports whether name is a push option.
func Is(name string) bool {
	switch name {
	case Delay, TTL, Priority, Group, IdempotencyKey:
		return true
	}
	return false
}

// The front ends read push options with SetText (HTTP) and SetValue (RPC),
// the one parser of each option, whose ranges are mapping's (MaxSeconds,
// MaxPriority); the push checks options built in Go (the lmq package, SQS)
// with Check, the same rules. Their errors name the option and say what it
// must be ("delay must be a number of seconds from 0 to …"), without
// ErrInvalid: each front end words the refusal in its protocol (HTTP
// "invalid request: …", RPC "badarg: push option …").

// SetText sets the option name from its text form: seconds for delay and
// ttl ("30", "0.25", "1e3"), an integer for priority, the group's name (not
// empty; the push checks the rest, mapping.ValidateGroup), the key as it is.
func (o *Options) SetText(name, s string) error {
	switch name {
	case Delay, TTL:
		d, err := mapping.ParseSeconds(name, s)
		if err != nil {
			return err
		}
		o.setDuration(name, d)
	case Priority:
		p, err := mapping.ParsePriority(s)
		if err != nil {
			return err
		}
		o.Priority = &p
	case Group:
		return o.setGroup(s)
	case IdempotencyKey:
		// Its length and characters are the push's to check
		// (checkIdempotencyKey): the refusal is the same in every protocol.
		o.IdempotencyKey = s
	default:
		return unknownOption(name)
	}
	return nil
}

// SetValue sets the option name from a decoded MessagePack value: a number
// of seconds (an integer or a float) for delay and ttl, an integer for
// priority, a string (str, or bin from clients that send strings as raw
// bytes) for group and idempotency_key; otherwise as SetText.
func (o *Options) SetValue(name string, v any) error {
	switch name {
	case Delay, TTL:
		f, ok := seconds(v)
		if !ok {
			return fmt.Errorf("%s must be a non-negative number of seconds", name)
		}
		d, err := mapping.SecondsDuration(name, f)
		if err != nil {
			return err
		}
		o.setDuration(name, d)
	case Priority:
		p, err := mapping.PriorityValue(v)
		if err != nil {
			return err
		}
		o.Priority = &p
	case Group, IdempotencyKey:
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case []byte:
			s = string(x)
		default:
			return fmt.Errorf("%s must be a string", name)
		}
		return o.SetText(name, s)
	default:
		return unknownOption(name)
	}
	return nil
}

func (o *Options) setDuration(name string, d time.Duration) {
	if name == Delay {
		o.Delay = d
	} else {
		o.TTL = d
	}
}

func (o *Options) setGroup(s string) error {
	if s == "" {
		return errors.New("group must not be empty")
	}
	o.Group = s
	return nil
}

func unknownOption(name string) error {
	return fmt.Errorf("unknown push option %s (known: %s)", name, Names)
}

// seconds reads a decoded MessagePack number.
func seconds(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case int:
		return float64(n), true
	}
	return 0, false
}

// Check reports, as ErrInvalid (store's, which is gateway's), the first of
// the options that is not acceptable by itself: the idempotency key's
// length and characters, delay and ttl, priority, with the rules SetText and SetValue apply. The rules
// that need the queue (its properties, whether it accumulates) and those
// of groups are the push's.
func (o Options) Check() error {
	if err := checkIdempotencyKey(o.IdempotencyKey); err != nil {
		return err
	}
	if err := mapping.CheckDuration(Delay, o.Delay); err != nil {
		return fmt.Errorf("%w: %w", store.ErrInvalid, err)
	}
	if err := mapping.CheckDuration(TTL, o.TTL); err != nil {
		return fmt.Errorf("%w: %w", store.ErrInvalid, err)
	}
	if o.Priority != nil {
		if err := mapping.CheckPriority(int64(*o.Priority)); err != nil {
			return fmt.Errorf("%w: %w", store.ErrInvalid, err)
		}
	}
	return nil
}

// Options are the per-message features beyond LMQ.
type Options struct {
	// Delay keeps the message invisible for this long.
	Delay time.Duration
	// TTL overrides the queue's ttl property: the message expires (is never
	// delivered) this long after its push.
	TTL time.Duration
	// IdempotencyKey, when set, makes a retried push with the same key
	// within gateway.IdempotencyWindow store the message once (a client
	// that got ErrUnknown retries with the same key).
	IdempotencyKey string
	// Priority, when set, is the message's priority, 0 to
	// mapping.MaxPriority (higher served first; ErrInvalid outside); nil
	// means the queue's priority property (default 0). Not available on
	// accumulating queues: a compound gets the queue's property.
	Priority *int
	// Group, when set, puts the message in that ordered group of the
	// queue (mapping.ValidateGroup; package groups): handed out one at a time,
	// in push order. Not with Delay, nor on accumulating queues.
	Group string
}

// maxIdempotencyKey bounds a key's length; it is stored with the message.
const maxIdempotencyKey = 256

// checkIdempotencyKey checks a key's length and characters, the same
// refusal in every protocol.
func checkIdempotencyKey(k string) error {
	if len(k) > maxIdempotencyKey {
		return fmt.Errorf("%w: idempotency key longer than %d bytes", store.ErrInvalid, maxIdempotencyKey)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] == 0x7f {
			return fmt.Errorf("%w: idempotency key has control characters", store.ErrInvalid)
		}
	}
	return nil
}
