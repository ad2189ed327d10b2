package gateway

import (
	"errors"
	"fmt"
	"time"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// The push options' names, the same in every protocol that has them: HTTP's
// query parameters (the key is the Idempotency-Key header there) and the
// keys of RPC push's option map.
const (
	OptDelay          = "delay"
	OptTTL            = "ttl"
	OptPriority       = "priority"
	OptGroup          = "group"
	OptIdempotencyKey = "idempotency_key"
)

// PushOptionNames lists the push options, for a refusal of an unknown one.
const PushOptionNames = "delay, ttl, idempotency_key, priority, group"

// IsPushOption reports whether name is a push option.
func IsPushOption(name string) bool {
	switch name {
	case OptDelay, OptTTL, OptPriority, OptGroup, OptIdempotencyKey:
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
func (o *PushOptions) SetText(name, s string) error {
	switch name {
	case OptDelay, OptTTL:
		d, err := mapping.ParseSeconds(name, s)
		if err != nil {
			return err
		}
		o.setDuration(name, d)
	case OptPriority:
		p, err := mapping.ParsePriority(s)
		if err != nil {
			return err
		}
		o.Priority = &p
	case OptGroup:
		return o.setGroup(s)
	case OptIdempotencyKey:
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
func (o *PushOptions) SetValue(name string, v any) error {
	switch name {
	case OptDelay, OptTTL:
		f, ok := seconds(v)
		if !ok {
			return fmt.Errorf("%s must be a non-negative number of seconds", name)
		}
		d, err := mapping.SecondsDuration(name, f)
		if err != nil {
			return err
		}
		o.setDuration(name, d)
	case OptPriority:
		p, err := mapping.PriorityValue(v)
		if err != nil {
			return err
		}
		o.Priority = &p
	case OptGroup, OptIdempotencyKey:
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

func (o *PushOptions) setDuration(name string, d time.Duration) {
	if name == OptDelay {
		o.Delay = d
	} else {
		o.TTL = d
	}
}

func (o *PushOptions) setGroup(s string) error {
	if s == "" {
		return errors.New("group must not be empty")
	}
	o.Group = s
	return nil
}

func unknownOption(name string) error {
	return fmt.Errorf("unknown push option %s (known: %s)", name, PushOptionNames)
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

// Check reports, as ErrInvalid, the first of the options that is not
// acceptable by itself: the idempotency key's length and characters, delay
// and ttl, priority, with the rules SetText and SetValue apply. The rules
// that need the queue (its properties, whether it accumulates) and those
// of groups are the push's.
func (o PushOptions) Check() error {
	if err := checkIdempotencyKey(o.IdempotencyKey); err != nil {
		return err
	}
	if err := mapping.CheckDuration(OptDelay, o.Delay); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := mapping.CheckDuration(OptTTL, o.TTL); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if o.Priority != nil {
		if err := mapping.CheckPriority(int64(*o.Priority)); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	return nil
}
