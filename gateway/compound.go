package gateway

import "github.com/lmq-gateway/lmq-gateway/gateway/message"

// EncodeCompound encodes parts as a compound message body
// (message.EncodeCompound).
func EncodeCompound(parts []Message) ([]byte, error) { return message.EncodeCompound(parts) }

// DecodeCompound decodes a compound message body (message.DecodeCompound:
// memory follows the bytes present; maxParts > 0 bounds the parts). Part
// bodies share memory with body.
func DecodeCompound(body []byte, maxParts int) ([]Message, error) {
	return message.DecodeCompound(body, maxParts)
}

// CheckHeaders reports whether the headers msg would store (its content-type
// and kept headers) fit mapping.MaxHeaderValue each and mapping.MaxStoredHeaders
// together; the error wraps ErrHeaderTooLarge (message.CheckHeaders). Front
// ends may call it before reading a body; Push calls it too.
func CheckHeaders(msg Message) error { return message.CheckHeaders(msg) }
