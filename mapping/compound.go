package mapping

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lmq-gateway/lmq-gateway/internal/mpack"
)

// A compound message's body is a MessagePack array of [headers, content]
// pairs, one per part in push order: headers is a map of the part's metadata
// ("content-type" when one was given, and kept request headers), content is
// binary. It is the shape of LMQ's cf=msgpack delivery, and the gateway
// stores an accumulated message that way: EncodeCompound writes both.

// Header is one request header kept with a message (LMQ's
// lmq_hook_preserve_header); Name is lowercase.
type Header struct {
	Name  string
	Value string
}

// Part is one message of a compound body.
type Part struct {
	// ContentType is the content-type given at push; "" when none was given.
	ContentType string
	Body        []byte
	// Kept are the kept request headers, in push order.
	Kept []Header
}

// EncodeCompound encodes parts as a compound message body, the one encoder
// of the format: a part's map holds "content-type" first (when ContentType
// is not ""), then its kept headers in their order, one value per name (the
// last given; ContentType before a kept "content-type"), as a decoder reads
// them back. The stored compounds and LMQ's cf=msgpack delivery (which gives
// every part its content type) are written by it alike.
func EncodeCompound(parts []Part) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.EncodeArrayLen(len(parts)); err != nil {
		return nil, err
	}
	for _, p := range parts {
		kept := uniqueHeaders(p.ContentType, p.Kept)
		n := len(kept)
		if p.ContentType != "" {
			n++
		}
		if err := enc.EncodeArrayLen(2); err != nil {
			return nil, err
		}
		if err := enc.EncodeMapLen(n); err != nil {
			return nil, err
		}
		if p.ContentType != "" {
			if err := encodeHeader(enc, "content-type", p.ContentType); err != nil {
				return nil, err
			}
		}
		for _, h := range kept {
			if err := encodeHeader(enc, h.Name, h.Value); err != nil {
				return nil, err
			}
		}
		if err := enc.EncodeBytes(p.Body); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

func encodeHeader(enc *msgpack.Encoder, name, value string) error {
	if err := enc.EncodeString(name); err != nil {
		return err
	}
	return enc.EncodeString(value)
}

// uniqueHeaders is kept with one entry per name, as a map holds them: the
// last value given, at the place of the name's first; without a kept
// "content-type" when contentType is given (it wins). kept itself when it
// has nothing to drop, as every delivered part (DecodeCompound made it so).
func uniqueHeaders(contentType string, kept []Header) []Header {
	drop := func(i int) bool {
		name := kept[i].Name
		if contentType != "" && name == "content-type" {
			return true
		}
		for _, h := range kept[:i] {
			if h.Name == name {
				return true
			}
		}
		return false
	}
	clean := true
	for i := range kept {
		if drop(i) {
			clean = false
			break
		}
	}
	if clean {
		return kept
	}
	out := make([]Header, 0, len(kept))
	for i, h := range kept {
		if drop(i) {
			continue
		}
		for _, later := range kept[i+1:] {
			if later.Name == h.Name {
				h.Value = later.Value
			}
		}
		out = append(out, h)
	}
	return out
}

// DecodeCompound decodes a compound message body. The body is outside input
// (a batch push, or whatever was published on a queue subject), so it is read
// by mpack, whose memory follows the bytes present, never a declared count.
// maxParts > 0 bounds the parts accepted. Part bodies share memory with body.
func DecodeCompound(body []byte, maxParts int) ([]Part, error) {
	parts, err := mpack.DecodeParts(body, maxParts)
	if err != nil {
		return nil, fmt.Errorf("decode compound: %w", err)
	}
	out := make([]Part, 0, len(parts))
	for _, p := range parts {
		m := Part{Body: p.Body}
		for _, h := range p.Headers {
			if h.Name == "content-type" {
				m.ContentType = h.Value // a map has one value per name: the last sent wins
				continue
			}
			m.Kept = append(m.Kept, Header{Name: h.Name, Value: h.Value})
		}
		m.Kept = LastByName(m.Kept)
		out = append(out, m)
	}
	return out, nil
}

// LastByName sorts headers by name and keeps the last sent of each name, as a
// map decoder would; sorting first keeps this O(n log n) for hostile bodies.
func LastByName(hs []Header) []Header {
	if len(hs) == 0 {
		return nil
	}
	sort.SliceStable(hs, func(a, b int) bool { return hs[a].Name < hs[b].Name })
	out := hs[:0]
	for i, h := range hs {
		if i+1 < len(hs) && hs[i+1].Name == h.Name {
			continue
		}
		out = append(out, h)
	}
	return out
}
