package gateway

import "github.com/lmq-gateway/lmq-gateway/mapping"

// EncodeCompound encodes parts as a compound message body
// (mapping.EncodeCompound: the format is mapping's).
func EncodeCompound(parts []Message) ([]byte, error) {
	ps := make([]mapping.Part, len(parts))
	for i, m := range parts {
		ps[i] = mapping.Part{ContentType: m.ContentType, Body: m.Body, Kept: m.Kept}
	}
	return mapping.EncodeCompound(ps)
}

// DecodeCompound decodes a compound message body (mapping.DecodeCompound:
// memory follows the bytes present; maxParts > 0 bounds the parts). Part
// bodies share memory with body.
func DecodeCompound(body []byte, maxParts int) ([]Message, error) {
	ps, err := mapping.DecodeCompound(body, maxParts)
	if err != nil {
		return nil, err
	}
	out := make([]Message, len(ps))
	for i, p := range ps {
		out[i] = Message{ContentType: p.ContentType, Body: p.Body, Kept: p.Kept}
	}
	return out, nil
}
