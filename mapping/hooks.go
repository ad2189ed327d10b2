package mapping

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// hooksFromValue parses the value of the "hooks" key:
//
//	{"pre_http_push": [["lmq_hook_preserve_header", ["user-agent"]], ...]}
//
// The result is never nil, so that "hooks":{} stays "set, no hooks" and can
// override hooks coming from the default list.
func hooksFromValue(v any) (Hooks, error) {
	m, ok := toMap(v)
	if !ok {
		return nil, errors.New(`hooks must be an object {"pre_http_push": [[HOOK, ARGS], ...]}`)
	}
	out := make(Hooks, len(m))
	for _, point := range slices.Sorted(maps.Keys(m)) { // sorted: stable errors
		val := m[point]
		if point != HookPointPreHTTPPush {
			return nil, fmt.Errorf("unknown hook point %s (known: %s)", quote(point), HookPointPreHTTPPush)
		}
		list, ok := toList(val)
		if !ok {
			return nil, fmt.Errorf("hooks.%s must be a list of [HOOK, ARGS] pairs", point)
		}
		hooks := make([]Hook, 0, len(list))
		for i, item := range list {
			h, err := hookFromValue(item)
			if err != nil {
				return nil, fmt.Errorf("hooks.%s[%d]: %w", point, i, err)
			}
			hooks = append(hooks, h)
		}
		out[point] = hooks
	}
	return out, nil
}

// hookFromValue parses one [NAME, ARGS] pair.
func hookFromValue(v any) (Hook, error) {
	pair, ok := toList(v)
	if !ok || len(pair) != 2 {
		return Hook{}, errors.New("a hook must be a [HOOK, ARGS] pair")
	}
	name, ok := toString(pair[0])
	if !ok {
		return Hook{}, errors.New("a hook name must be a string")
	}
	if name != HookPreserveHeader {
		return Hook{}, fmt.Errorf("unknown hook %s (known: %s)", quote(name), HookPreserveHeader)
	}
	args, ok := toList(pair[1])
	if !ok {
		return Hook{}, fmt.Errorf("the arguments of %s must be a list of header names", name)
	}
	names := make([]string, 0, len(args))
	for _, a := range args {
		s, ok := toString(a)
		if !ok || !isToken(s) {
			return Hook{}, fmt.Errorf("the arguments of %s must be HTTP header names", name)
		}
		// HTTP header names are case-insensitive; one spelling keeps lookups simple.
		names = append(names, strings.ToLower(s))
	}
	return Hook{Name: name, Args: names}, nil
}

// isToken reports whether s is an RFC 9110 token, the syntax of header names.
// Anything else could never match a request header, and the name ends up in a
// NATS header name (HdrKeepPrefix + name), where ':' or spaces would break it.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// appendJSON writes h as {"point":[["name",["arg",...]],...],...}, points sorted.
func (h Hooks) appendJSON(b *bytes.Buffer) {
	b.WriteByte('{')
	for i, point := range h.sortedPoints() {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, point)
		b.WriteString(":[")
		for j, hk := range h[point] {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('[')
			writeString(b, hk.Name)
			b.WriteString(",[")
			for k, a := range hk.Args {
				if k > 0 {
					b.WriteByte(',')
				}
				writeString(b, a)
			}
			b.WriteString("]]")
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
}

// value renders h for MessagePack: point -> []any{[]any{name, []any{args...}}}.
func (h Hooks) value() map[string]any {
	out := make(map[string]any, len(h))
	for point, hooks := range h {
		list := make([]any, len(hooks))
		for i, hk := range hooks {
			args := make([]any, len(hk.Args))
			for j, a := range hk.Args {
				args[j] = a
			}
			list[i] = []any{hk.Name, args}
		}
		out[point] = list
	}
	return out
}
