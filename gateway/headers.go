package gateway

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

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

// JetStream API error codes (nats-server's jetstream_errors_generated.go)
// that jsErr classifies by code; nats.go names none of them.
const (
	jsErrInsufficientResources jetstream.ErrorCode = 10023 // disk full, account limits
	jsErrMemoryResources       jetstream.ErrorCode = 10028
	jsErrStorageResources      jetstream.ErrorCode = 10047
	jsErrHeaderTooLarge        jetstream.ErrorCode = 10097 // headers beyond 64 KiB
)

// classifyAPIError is jsErr's rule for the JetStream API errors it knows by
// code; ok is false for the others. A store out of resources (the disk full,
// a limit reached) may take the next attempt once space is freed: unavailable,
// which front ends answer 503 with Retry-After. Headers too large never will:
// CheckHeaders should have caught them, this is the backstop.
func classifyAPIError(op string, err error) (_ error, ok bool) {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return nil, false
	}
	switch apiErr.ErrorCode {
	case jsErrInsufficientResources, jsErrMemoryResources, jsErrStorageResources:
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err), true
	case jsErrHeaderTooLarge:
		return fmt.Errorf("%s: %w: %w", op, ErrHeaderTooLarge, err), true
	}
	return nil, false
}
