// Package message holds the message as the core's API carries it
// (gateway.Message is an alias of Message): its content, the check of the
// headers it would store, its compound body format, its form as the store
// encodes it, and the reading of a pushed body against the size limits.
//
// It is apart from package gateway because these are values and pure
// functions over them, used by the push, pull and accumulation paths alike
// and needing nothing of the core's state. It imports neither package
// gateway nor nats.go.
package message

import (
	"errors"
	"fmt"
	"io"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store"
)

// Header is one kept request header (the preserve-header hook); Name is
// lowercase. An alias, so that a message's headers go to and from the
// compound body format (mapping.Part) without a copy.
type Header = mapping.Header

// Message is what a client pushes, and one part of a compound delivery.
type Message struct {
	// ContentType is the content-type given at push; "" when none was given
	// (front ends report mapping.DefaultContentType then).
	ContentType string
	Body        []byte
	// Kept are request headers kept by the preserve-header hook, in push order.
	Kept []Header

	// stored is set by InStore: the body is in the Object Store already.
	stored *storedBody
}

// storedBody is a body the push path already wrote to the Object Store: the
// message carries only the reference (store.Content.Object).
type storedBody struct {
	name string
	size int64
}

// InStore is m whose body the push path already wrote to the Object Store
// as object name, of size bytes: m carries only the reference.
func InStore(m Message, name string, size int64) Message {
	m.Body, m.stored = nil, &storedBody{name: name, size: size}
	return m
}

// Stored reports whether m's body is in the Object Store already (InStore).
func Stored(m Message) bool { return m.stored != nil }

// Size is the body's length, also when it is in the Object Store already.
func Size(m Message) int {
	if m.stored != nil {
		return int(m.stored.size)
	}
	return len(m.Body)
}

// Content is m as the store encodes it.
func Content(m Message) store.Content {
	c := store.Content{ContentType: m.ContentType, Body: m.Body, Kept: m.Kept}
	if m.stored != nil {
		c.Object = m.stored.name
	}
	return c
}

// Decoded is the message the store read back (store.Decode's results).
func Decoded(c store.Content, err error) (Message, error) {
	if err != nil {
		return Message{}, err
	}
	return Message{ContentType: c.ContentType, Body: c.Body, Kept: c.Kept}, nil
}

// CheckHeaders reports whether the headers msg would store (its content-type
// and kept headers) fit mapping.MaxHeaderValue each and mapping.MaxStoredHeaders
// together; the error wraps store.ErrHeaderTooLarge. They travel as NATS
// headers, and a large one used to fail in JetStream ("header size exceeds
// maximum") and came back as 503, which invites retries of a request that
// can never succeed.
func CheckHeaders(msg Message) error {
	total := 0
	add := func(name, value string) error {
		if len(value) > mapping.MaxHeaderValue {
			return fmt.Errorf("%w: %s is %d bytes, the maximum is %d", store.ErrHeaderTooLarge, name, len(value), mapping.MaxHeaderValue)
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
		return fmt.Errorf("%w: the stored headers take %d bytes, the maximum is %d", store.ErrHeaderTooLarge, total, mapping.MaxStoredHeaders)
	}
	return nil
}

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

// errBodyTooLarge is BodyReader's error beyond its limit.
var errBodyTooLarge = errors.New("body too large")

// BodyReader reads a pushed body, counting it against Max and remembering
// the reader's own error (to tell it from JetStream's).
type BodyReader struct {
	r io.Reader
	// Max is the most bytes it reads; one more fails the read.
	Max int64
	n   int64
	err error
}

// NewBodyReader reads r, at most max bytes.
func NewBodyReader(r io.Reader, max int64) *BodyReader { return &BodyReader{r: r, Max: max} }

func (b *BodyReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if room := b.Max + 1 - b.n; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n > b.Max {
		b.err = errBodyTooLarge
		return n, b.err
	}
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// Err is the error the body itself gave (or its limit), nil when none.
func (b *BodyReader) Err() error { return b.err }

// Fail classifies an error met while reading the body: store.ErrTooLarge
// beyond Max, else store.ErrInvalid wrapping it.
func (b *BodyReader) Fail(err error) error {
	if errors.Is(err, errBodyTooLarge) {
		return fmt.Errorf("%w: the body is larger than %d bytes", store.ErrTooLarge, b.Max)
	}
	return fmt.Errorf("%w: reading body: %w", store.ErrInvalid, err)
}
