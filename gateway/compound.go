package gateway

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/vmihailenco/msgpack/v5"
)

// A compound message's body is a MessagePack array of [headers, content]
// pairs, one per part in push order: headers is a map of the part's metadata
// ("content-type" when one was given, and kept request headers), content is
// binary. It is the shape of LMQ's cf=msgpack delivery.

// EncodeCompound encodes parts as a compound message body.
func EncodeCompound(parts []Message) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.EncodeArrayLen(len(parts)); err != nil {
		return nil, err
	}
	for _, p := range parts {
		hdr := make(map[string]string, 1+len(p.Kept))
		for _, h := range p.Kept {
			hdr[h.Name] = h.Value
		}
		if p.ContentType != "" {
			hdr["content-type"] = p.ContentType
		}
		if err := enc.EncodeArrayLen(2); err != nil {
			return nil, err
		}
		if err := enc.Encode(hdr); err != nil {
			return nil, err
		}
		if err := enc.EncodeBytes(p.Body); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// DecodeCompound decodes a compound message body.
func DecodeCompound(body []byte) ([]Message, error) {
	var pairs [][]msgpack.RawMessage
	if err := msgpack.Unmarshal(body, &pairs); err != nil {
		return nil, fmt.Errorf("decode compound: %w", err)
	}
	out := make([]Message, 0, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("decode compound: part %d is not a pair", i)
		}
		var hdr map[string]string
		if err := msgpack.Unmarshal(p[0], &hdr); err != nil {
			return nil, fmt.Errorf("decode compound: part %d headers: %w", i, err)
		}
		var content []byte
		if err := msgpack.Unmarshal(p[1], &content); err != nil {
			return nil, fmt.Errorf("decode compound: part %d content: %w", i, err)
		}
		m := Message{ContentType: hdr["content-type"], Body: content}
		delete(hdr, "content-type")
		for k, v := range hdr {
			m.Kept = append(m.Kept, Header{Name: k, Value: v})
		}
		sort.Slice(m.Kept, func(a, b int) bool { return m.Kept[a].Name < m.Kept[b].Name })
		out = append(out, m)
	}
	return out, nil
}
