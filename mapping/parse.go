package mapping

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ParseProps parses a JSON object of properties: a PATCH body or the PROPS of
// a default-list entry. Keys: accum (or its old name pack; non-negative number
// of seconds, rounded to whole milliseconds), retry (non-negative JSON
// integer), timeout (non-negative number of seconds), hooks, and beyond LMQ
// ttl, dead_letter, release_on_disconnect, priority (an integer 0..MaxPriority),
// paused (true or false), max_inflight (an integer 0..MaxInflight) and
// dead_letter_queue (a queue name, or "" for none). accum, timeout and ttl are at most MaxSeconds (10
// years). {} is valid and sets nothing. Every error wraps ErrInvalidProps.
func ParseProps(data []byte) (Props, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return Props{}, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return Props{}, fmt.Errorf("%w: expected a JSON object, got %s", ErrInvalidProps, describe(v))
	}
	p, err := propsFromMap(m)
	if err != nil {
		return Props{}, fmt.Errorf("%w: %w", ErrInvalidProps, err)
	}
	return p, nil
}

// PropsFromMap is ParseProps for a value already decoded from MessagePack
// (update_props). Numbers may have any Go integer or float type, strings may
// be string or []byte (LMQ's old "raw" type decodes to either), lists []any
// and maps map[string]any or map[any]any. The rules are those of ParseProps;
// in particular retry must have an integer type, a float 2.0 is rejected.
func PropsFromMap(m map[string]any) (Props, error) {
	p, err := propsFromMap(m)
	if err != nil {
		return Props{}, fmt.Errorf("%w: %w", ErrInvalidProps, err)
	}
	return p, nil
}

// decodeJSON decodes exactly one JSON value, keeping numbers as json.Number so
// that integers can be told from floats ("retry": 2.0 is invalid).
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: empty body", ErrInvalidProps)
		}
		return nil, fmt.Errorf("%w: malformed JSON: %w", ErrInvalidProps, err)
	}
	// Decode stops after the first value; "{} {}" or "{}x" must not pass.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: malformed JSON: data after the value", ErrInvalidProps)
	}
	return v, nil
}

// propsFromMap does the work of ParseProps and PropsFromMap; its errors do not
// wrap ErrInvalidProps yet, so that callers can add context (a default-list
// entry number) between the prefix and the detail.
func propsFromMap(m map[string]any) (Props, error) {
	var p Props
	// Sorted so that a body with several faults always reports the same one.
	for _, key := range slices.Sorted(maps.Keys(m)) {
		v := m[key]
		switch key {
		case "accum", "pack":
			// LMQ keeps accum in whole milliseconds (0.2504 -> 0.25).
			f, err := toSeconds(key, v, true)
			if err != nil {
				return Props{}, err
			}
			if p.Accum != nil && *p.Accum != f {
				return Props{}, errors.New("accum and pack (its old name) are both given, with different values")
			}
			p.Accum = &f
		case "timeout":
			f, err := toSeconds(key, v, false)
			if err != nil {
				return Props{}, err
			}
			p.Timeout = &f
		case "retry":
			n, err := toRetry(v)
			if err != nil {
				return Props{}, err
			}
			p.Retry = &n
		case "ttl":
			// Beyond LMQ: how long a message may wait before it expires.
			f, err := toSeconds(key, v, false)
			if err != nil {
				return Props{}, err
			}
			p.TTL = &f
		case "dead_letter":
			// Beyond LMQ: keep retry-exhausted messages instead of dropping them.
			b, ok := v.(bool)
			if !ok {
				return Props{}, errors.New("dead_letter must be true or false")
			}
			p.DeadLetter = &b
		case "release_on_disconnect":
			// Beyond LMQ: deliveries bound to the RPC connection that got them.
			b, ok := v.(bool)
			if !ok {
				return Props{}, errors.New("release_on_disconnect must be true or false")
			}
			p.ReleaseOnDisconnect = &b
		case "priority":
			// Beyond LMQ: the default priority of the queue's pushes.
			n, err := toPriority(v)
			if err != nil {
				return Props{}, err
			}
			p.Priority = &n
		case "paused":
			// Beyond LMQ: hold the queue's messages (queue control).
			b, ok := v.(bool)
			if !ok {
				return Props{}, errors.New("paused must be true or false")
			}
			p.Paused = &b
		case "max_inflight":
			// Beyond LMQ: a bound on the queue's deliveries in flight.
			n, err := toIntIn(v, 0, MaxInflight, fmt.Errorf("max_inflight must be an integer from 0 (no limit) to %d", MaxInflight))
			if err != nil {
				return Props{}, err
			}
			p.MaxInflight = &n
		case "dead_letter_queue":
			// Beyond LMQ: where retry-exhausted messages go (SQS's redrive).
			s, ok := toString(v)
			if !ok {
				return Props{}, errors.New(`dead_letter_queue must be a queue name (a string; "" for none)`)
			}
			if s != "" {
				if err := ValidateQueueName(s); err != nil {
					return Props{}, fmt.Errorf("dead_letter_queue: %w", err)
				}
			}
			p.DeadLetterQueue = &s
		case "hooks":
			h, err := hooksFromValue(v)
			if err != nil {
				return Props{}, err
			}
			p.Hooks = h
		default:
			return Props{}, fmt.Errorf("unknown key %s (known: accum, pack, retry, timeout, hooks, ttl, dead_letter, release_on_disconnect, priority, paused, max_inflight, dead_letter_queue)", quote(key))
		}
	}
	return p, nil
}

// toSeconds converts a number of seconds (accum, pack, timeout), rounded to
// whole milliseconds when wholeMs is set.
func toSeconds(key string, v any, wholeMs bool) (float64, error) {
	f, ok := toFloat(v)
	if !ok || f < 0 || math.IsNaN(f) || math.IsInf(f, -1) {
		return 0, fmt.Errorf("%s must be a non-negative number (seconds)", key)
	}
	// Also +Inf and anything beyond MaxSeconds, which would overflow the
	// times computed from it.
	if err := CheckSeconds(key, f); err != nil {
		return 0, err
	}
	if wholeMs {
		f = math.Round(f*1000) / 1000
	}
	f, ok = canonical(f)
	if !ok {
		return 0, fmt.Errorf("%s is too large", key)
	}
	return f, nil
}

// canonical rounds f to what it renders as (15 significant digits), so that
// the value in force is the one GET shows and a stored rendering parses back
// to the same value (0.30000000000000004 becomes 0.3). ok is false when the
// rounding overflows (near the largest float64), which could not be read back.
func canonical(f float64) (c float64, ok bool) {
	if f == 0 {
		return 0, true // also turns -0 into 0, which would render as "-0"
	}
	c, err := strconv.ParseFloat(formatSeconds(f), 64)
	return c, err == nil && !math.IsInf(c, 0)
}

// toFloat accepts every numeric type a JSON or MessagePack decoder produces.
func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil
	case float64:
		return n, true
	case float32:
		// Go through the shortest decimal form, so that a client's float32 0.2
		// means 0.2 and not 0.20000000298023224.
		f, err := strconv.ParseFloat(strconv.FormatFloat(float64(n), 'g', -1, 32), 64)
		return f, err == nil
	}
	if i, ok := toInt64(v); ok {
		return float64(i), true
	}
	if u, ok := toUint64(v); ok {
		return float64(u), true
	}
	return 0, false
}

// toRetry accepts only integers: a JSON number without fraction or exponent,
// or a Go integer type. Floats are rejected even when whole (2.0): the spec
// makes "retry not an integer" invalid, and a float type is not an integer.
func toRetry(v any) (int, error) {
	bad := fmt.Errorf("retry must be a non-negative integer (at most %d)", MaxRetry)
	var n int64
	switch x := v.(type) {
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			return 0, bad
		}
		i, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return 0, bad
		}
		n = i
	default:
		if i, ok := toInt64(v); ok {
			n = i
		} else if u, ok := toUint64(v); ok {
			if u > MaxRetry {
				return 0, bad
			}
			n = int64(u)
		} else {
			return 0, bad
		}
	}
	if n < 0 || n > MaxRetry {
		return 0, bad
	}
	return int(n), nil
}

func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}

func toUint64(v any) (uint64, bool) {
	switch n := v.(type) {
	case uint:
		return uint64(n), true
	case uint8:
		return uint64(n), true
	case uint16:
		return uint64(n), true
	case uint32:
		return uint64(n), true
	case uint64:
		return n, true
	}
	return 0, false
}

// toString accepts string and []byte: LMQ's MessagePack dialect has only
// "raw", which decoders hand back as either.
func toString(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), true
	}
	return "", false
}

// toList accepts the list types decoders produce.
func toList(v any) ([]any, bool) {
	switch l := v.(type) {
	case []any:
		return l, true
	case []string:
		out := make([]any, len(l))
		for i, s := range l {
			out[i] = s
		}
		return out, true
	}
	return nil, false
}

// toMap accepts map[string]any and, from MessagePack decoders that do not
// assume string keys, map[any]any whose keys are all strings.
func toMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, val := range m {
			s, ok := toString(k)
			if !ok {
				return nil, false
			}
			out[s] = val
		}
		return out, true
	}
	return nil, false
}

// describe names the JSON type of a decoded value for error messages.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// quote renders s as a JSON string, for error messages clients read.
func quote(s string) string {
	var b bytes.Buffer
	writeString(&b, s)
	return b.String()
}
