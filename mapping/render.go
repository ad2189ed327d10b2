package mapping

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// JSON renders the set keys as a JSON object, keys sorted (accum, hooks,
// retry, timeout), no spaces: {"accum":30}, {"retry":0}, {} when none is set.
func (p Props) JSON() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	sep := func(key string) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		writeString(&b, key)
		b.WriteByte(':')
	}
	if p.Accum != nil {
		sep("accum")
		b.WriteString(formatSeconds(*p.Accum))
	}
	if p.DeadLetter != nil {
		sep("dead_letter")
		b.WriteString(strconv.FormatBool(*p.DeadLetter))
	}
	if p.DeadLetterQueue != nil {
		sep("dead_letter_queue")
		writeString(&b, *p.DeadLetterQueue)
	}
	if p.Hooks != nil {
		sep("hooks")
		p.Hooks.appendJSON(&b)
	}
	if p.MaxInflight != nil {
		sep("max_inflight")
		b.WriteString(strconv.Itoa(*p.MaxInflight))
	}
	if p.Paused != nil {
		sep("paused")
		b.WriteString(strconv.FormatBool(*p.Paused))
	}
	if p.Priority != nil {
		sep("priority")
		b.WriteString(strconv.Itoa(*p.Priority))
	}
	if p.ReleaseOnDisconnect != nil {
		sep("release_on_disconnect")
		b.WriteString(strconv.FormatBool(*p.ReleaseOnDisconnect))
	}
	if p.Retry != nil {
		sep("retry")
		b.WriteString(strconv.Itoa(*p.Retry))
	}
	if p.Timeout != nil {
		sep("timeout")
		b.WriteString(formatSeconds(*p.Timeout))
	}
	if p.TTL != nil {
		sep("ttl")
		b.WriteString(formatSeconds(*p.TTL))
	}
	b.WriteByte('}')
	return b.Bytes()
}

// Map renders the set keys for MessagePack-RPC. accumKey names the accum key:
// "accum", or "pack" for get_default_props, which LMQ answered with the old
// name; "" means "accum". accum and timeout are float64, retry int64, hooks
// map[string]any of []any{[]any{name, []any{args...}}, ...}.
func (p Props) Map(accumKey string) map[string]any {
	if accumKey == "" {
		accumKey = "accum"
	}
	m := map[string]any{}
	if p.Accum != nil {
		m[accumKey] = *p.Accum
	}
	if p.Hooks != nil {
		m["hooks"] = p.Hooks.value()
	}
	if p.Retry != nil {
		m["retry"] = int64(*p.Retry)
	}
	if p.Timeout != nil {
		m["timeout"] = *p.Timeout
	}
	if p.TTL != nil {
		m["ttl"] = *p.TTL
	}
	if p.DeadLetter != nil {
		m["dead_letter"] = *p.DeadLetter
	}
	if p.ReleaseOnDisconnect != nil {
		m["release_on_disconnect"] = *p.ReleaseOnDisconnect
	}
	if p.Priority != nil {
		m["priority"] = int64(*p.Priority)
	}
	if p.Paused != nil {
		m["paused"] = *p.Paused
	}
	if p.MaxInflight != nil {
		m["max_inflight"] = int64(*p.MaxInflight)
	}
	if p.DeadLetterQueue != nil {
		m["dead_letter_queue"] = *p.DeadLetterQueue
	}
	return m
}

// props views e as a Props with every LMQ key set, except hooks, which LMQ
// only showed when a queue has some; the keys beyond LMQ (ttl, dead_letter,
// release_on_disconnect) only appear when in use, so that LMQ clients see
// LMQ's exact text.
func (e Effective) props() Props {
	p := Props{Accum: &e.Accum, Retry: &e.Retry, Timeout: &e.Timeout}
	if len(e.Hooks) > 0 {
		p.Hooks = e.Hooks
	}
	if e.TTL > 0 {
		p.TTL = &e.TTL
	}
	if e.DeadLetter {
		p.DeadLetter = &e.DeadLetter
	}
	if e.ReleaseOnDisconnect {
		p.ReleaseOnDisconnect = &e.ReleaseOnDisconnect
	}
	if e.Priority > 0 {
		p.Priority = &e.Priority
	}
	if e.Paused {
		p.Paused = &e.Paused
	}
	if e.MaxInflight > 0 {
		p.MaxInflight = &e.MaxInflight
	}
	if e.DeadLetterQueue != "" {
		p.DeadLetterQueue = &e.DeadLetterQueue
	}
	return p
}

// JSON renders the effective properties: {"accum":0,"retry":2,"timeout":30},
// with "hooks" (between accum and retry) only when there are some.
func (e Effective) JSON() []byte { return e.props().JSON() }

// Map renders the effective properties for MessagePack-RPC, like Props.Map.
func (e Effective) Map(accumKey string) map[string]any { return e.props().Map(accumKey) }

// formatSeconds prints a number like C's %.15g, as LMQ did: 30, 0.2, 0, 1e-05.
// 15 significant digits hide binary noise (0.1+0.2 prints as 0.3).
func formatSeconds(f float64) string {
	if f == 0 {
		return "0" // never "-0"
	}
	return strconv.FormatFloat(f, 'g', 15, 64)
}

// writeString writes s as a JSON string. encoding/json does the escaping, but
// without its HTML escaping of < > &, which would change a regexp like "a&b"
// in the default list, whose text must come back exactly as it was given.
func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // Encode appends a newline
}
