package gateway

import (
	"fmt"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// CheckHeaders reports whether the headers msg would store (its content-type
// and kept headers) fit mapping.MaxHeaderValue each and mapping.MaxStoredHeaders
// together; the error wraps ErrHeaderTooLarge. They travel as NATS headers,
// and a large one used to fail in JetStream ("header size exceeds maximum")
// and came back as 503, which invites retries of a request that can never
// succeed. Front ends may call it before reading a body; Push calls it too.
func CheckHeaders(msg Message) error {
	total := 0
	add := func(name, value string) error {
		if len(value) > mapping.MaxHeaderValue {
			return fmt.Errorf("%w: %s is %d bytes, the maximum is %d", ErrHeaderTooLarge, name, len(value), mapping.MaxHeaderValue)
		}
		total += len(name) + len(value) + len(": \r\n")
		return nil
	}
	if msg.ContentType != "" {
		if err := add("content-type", msg.ContentType); err != nil {
			return err
		}
		// Stored under mapping.HdrContentType rather than its own name.
		total += len(mapping.HdrContentType) - len("content-type")
	}
	for _, h := range msg.Kept {
		if err := add(h.Name, h.Value); err != nil {
			return err
		}
		total += len(mapping.HdrKeepPrefix)
	}
	if total > mapping.MaxStoredHeaders {
		return fmt.Errorf("%w: the stored headers take %d bytes, the maximum is %d", ErrHeaderTooLarge, total, mapping.MaxStoredHeaders)
	}
	return nil
}
