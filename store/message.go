package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/store/bus"
)

// Header is one kept request header (the preserve-header hook); Name is
// lowercase. The one type of package mapping (gateway.Header is the same
// alias), so headers pass between the layers without a copy.
type Header = mapping.Header

// Content is what a stored message carries for its client: what Encode
// writes and Decode reads back.
type Content struct {
	// ContentType is the content-type given at push; "" when none was given.
	ContentType string
	// Body is the body; ignored by Encode when Object is set.
	Body []byte
	// Kept are request headers kept by the preserve-header hook, in push order.
	Kept []Header
	// Object names a body already in the Object Store (PutBody); the
	// message then carries only the reference. Decode leaves it empty.
	Object string
}

// headerRoom is what a message's headers may take besides its body when
// deciding whether the body fits one NATS message.
const headerRoom = 8 << 10

// InlineLimit is the largest body stored inside the queue's NATS message;
// larger ones go to the Object Store.
func (s *Store) InlineLimit() int64 {
	return max(s.nc.MaxPayload()-headerRoom, 0)
}

// Encode builds the NATS message storing c on subject for queue, stamped
// with the push time and retry (mapping.HdrPushedAt, HdrRetry): the body
// inline, or in the Object Store when it is too large for one NATS message;
// metadata in headers (mapping.Hdr*). The caller adds its own headers and
// stores the message with Publish.
func (s *Store) Encode(ctx context.Context, queue, subject string, c Content, retry int) (*bus.Msg, error) {
	m := bus.NewMsg(subject)
	if c.ContentType != "" {
		m.Header.Set(mapping.HdrContentType, c.ContentType)
	}
	m.Header.Set(mapping.HdrPushedAt, strconv.FormatInt(time.Now().UnixNano(), 10))
	m.Header.Set(mapping.HdrRetry, strconv.Itoa(retry))
	for _, h := range c.Kept {
		m.Header.Add(mapping.HdrKeepPrefix+h.Name, h.Value)
	}
	if c.Object != "" {
		m.Header.Set(mapping.HdrObject, c.Object)
		return m, nil
	}
	if int64(len(c.Body))+headerRoom <= s.nc.MaxPayload() {
		m.Data = c.Body
		return m, nil
	}
	obj, err := s.objectStore(ctx)
	if err != nil {
		return nil, Classify("store large message", err)
	}
	name := mapping.EncodeName(queue) + "/" + uuid.NewString()
	if _, err := obj.PutBytes(ctx, name, c.Body); err != nil {
		return nil, Classify("store large message", err)
	}
	m.Header.Set(mapping.HdrObject, name)
	return m, nil
}

// Decode reads back the content of a message stored by Encode (or published
// by a plain NATS program, whose body is the content), loading a large
// body from the Object Store.
func (s *Store) Decode(ctx context.Context, m *bus.Msg) (Content, error) {
	return s.decode(ctx, nats.Header(m.Header), m.Data)
}

// DecodeStored is Decode of a message read back by sequence (Shard.Next,
// Log).
func (s *Store) DecodeStored(ctx context.Context, m *StoredMsg) (Content, error) {
	return s.decode(ctx, nats.Header(m.Header), m.Data)
}

func (s *Store) decode(ctx context.Context, h nats.Header, data []byte) (Content, error) {
	c := Content{ContentType: h.Get(mapping.HdrContentType), Body: data, Kept: KeptHeaders(h)}
	if ref := h.Get(mapping.HdrObject); ref != "" {
		obj, err := s.objectStore(ctx)
		if err != nil {
			return Content{}, Classify("load large message", err)
		}
		if c.Body, err = obj.GetBytes(ctx, ref); err != nil {
			return Content{}, Classify("load large message", err)
		}
	}
	return c, nil
}

// KeptHeaders reads the kept request headers back from a stored message's
// headers (a nats.Header or Headers; in no particular order: they are
// maps); nil when none.
func KeptHeaders(h map[string][]string) []Header {
	var kept []Header
	for k, vs := range h {
		name, ok := cutPrefixFold(k, mapping.HdrKeepPrefix)
		if !ok {
			continue
		}
		for _, v := range vs {
			kept = append(kept, Header{Name: strings.ToLower(name), Value: v})
		}
	}
	return kept
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return "", false
	}
	return s[len(prefix):], true
}

// BodyLost reports whether Decode failed because the Object Store body a
// message names is missing or unreadable, which no retry mends (unlike a
// JetStream that does not answer).
func BodyLost(err error) bool {
	return errors.Is(err, jetstream.ErrObjectNotFound) ||
		errors.Is(err, jetstream.ErrBadObjectMeta) ||
		errors.Is(err, jetstream.ErrDigestMismatch) ||
		errors.Is(err, jetstream.ErrNameRequired)
}
