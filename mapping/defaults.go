package mapping

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
)

// ParseDefaultList parses the default-properties list [[REGEXP, PROPS], ...].
// REGEXP is a Go (RE2) regular expression; PROPS follows ParseProps. [] is the
// empty list. null is rejected like any other non-array: a client wanting no
// defaults sends [] or DELETE. Every error wraps ErrInvalidProps.
func ParseDefaultList(data []byte) (DefaultList, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: the default list must be a JSON array of [REGEXP, PROPS] pairs, got %s",
			ErrInvalidProps, describe(v))
	}
	return defaultList(list)
}

// DefaultListFromSlice is ParseDefaultList for a value decoded from
// MessagePack (set_default_props): []any of []any{string or []byte, map}.
func DefaultListFromSlice(v []any) (DefaultList, error) {
	return defaultList(v)
}

func defaultList(list []any) (DefaultList, error) {
	out := make(DefaultList, 0, len(list))
	for i, item := range list {
		e, err := defaultEntry(item)
		if err != nil {
			// 1-based: the way people count entries of a list they wrote.
			return nil, fmt.Errorf("%w: default list entry %d: %w", ErrInvalidProps, i+1, err)
		}
		out = append(out, e)
	}
	return out, nil
}

func defaultEntry(item any) (DefaultEntry, error) {
	pair, ok := toList(item)
	if !ok || len(pair) != 2 {
		return DefaultEntry{}, errors.New("must be a [REGEXP, PROPS] pair")
	}
	pattern, ok := toString(pair[0])
	if !ok {
		return DefaultEntry{}, errors.New("the regexp must be a string")
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return DefaultEntry{}, fmt.Errorf("invalid regexp %s: %w", quote(pattern), err)
	}
	m, ok := toMap(pair[1])
	if !ok {
		return DefaultEntry{}, errors.New("the properties must be an object")
	}
	p, err := propsFromMap(m)
	if err != nil {
		return DefaultEntry{}, err
	}
	return DefaultEntry{Pattern: pattern, Re: re, Props: p}, nil
}

// JSON renders the list as it was given (each entry's set keys only):
// [["accum/.*",{"accum":30}],[".*",{"retry":0}]]; [] when empty.
func (l DefaultList) JSON() []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, e := range l {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('[')
		writeString(&b, e.Pattern)
		b.WriteByte(',')
		b.Write(e.Props.JSON())
		b.WriteByte(']')
	}
	b.WriteByte(']')
	return b.Bytes()
}

// Slice renders the list for MessagePack-RPC: []any{[]any{pattern, props}},
// props as Props.Map(accumKey) (get_default_props uses "pack"). Never nil, so
// that an empty list encodes as an empty array rather than nil.
func (l DefaultList) Slice(accumKey string) []any {
	out := make([]any, len(l))
	for i, e := range l {
		out[i] = []any{e.Pattern, e.Props.Map(accumKey)}
	}
	return out
}

// Match returns the props of the FIRST entry whose regexp matches the queue
// name anywhere (unanchored, like LMQ's re:run), if any.
func (l DefaultList) Match(queue string) (Props, bool) {
	for _, e := range l {
		re := e.Re
		if re == nil {
			// An entry built by hand rather than parsed; an invalid pattern
			// cannot match anything.
			var err error
			if re, err = regexp.Compile(e.Pattern); err != nil {
				continue
			}
		}
		if re.MatchString(queue) {
			return e.Props, true
		}
	}
	return Props{}, false
}

// Resolve computes a queue's effective properties: the system defaults
// {accum:0, retry:2, timeout:30}, overridden by the set keys of the first
// matching default entry, overridden by the set keys of the queue's own.
func Resolve(defaults DefaultList, queue string, own Props) Effective {
	p := Props{}
	if d, ok := defaults.Match(queue); ok {
		p = d
	}
	p = p.Merge(own) // copies, so the result shares nothing with the inputs
	return Effective{
		Accum:      valueOr(p.Accum, DefaultAccum),
		Retry:      valueOr(p.Retry, DefaultRetry),
		Timeout:    valueOr(p.Timeout, DefaultTimeout),
		Hooks:      p.Hooks,
		TTL:        valueOr(p.TTL, 0),
		DeadLetter: valueOr(p.DeadLetter, false),

		ReleaseOnDisconnect: valueOr(p.ReleaseOnDisconnect, false),
		Priority:            valueOr(p.Priority, 0),
		Paused:              valueOr(p.Paused, false),
		MaxInflight:         valueOr(p.MaxInflight, 0),
		DeadLetterQueue:     valueOr(p.DeadLetterQueue, ""),
	}
}
