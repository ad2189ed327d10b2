package jsapi

import (
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Reading the PubAck of one stored message without jetstream.PublishMsg
// (the request itself is package store's publishOnce, store/publish.go).
//
// Every push, release, dead letter, accumulated compound and copied message
// is one JetStream publish, and jetstream.PublishMsg spends on each an options
// struct, its own context handling and an encoding/json decode of the PubAck
// (reflection over two nested structs); in CPU profiles of an RPC push that
// was about 3 µs of 60. publishOnce does what PublishMsg with
// WithRetryAttempts(0) does underneath (one request on the connection) and
// reads the PubAck's common success form by hand. Whatever the hand parser
// does not fully understand goes to encoding/json into the shapes nats.go
// uses, so that every answer means what it meant through PublishMsg, with
// the same errors: an API error is a wrapped *jetstream.APIError, "no
// responders" is jetstream.ErrNoStreamResponse, an answer without a stream
// name (or not JSON) is jetstream.ErrInvalidJSAck.
//
// nats-server (v2.15.2, stream.go) writes a successful PubAck from a
// template, {"stream":"NAME","seq":N} or {"stream":"NAME","domain":"D","seq":N},
// closed by "}" or by ",\"duplicate\": true}" for a message whose
// Nats-Msg-Id it has seen (or by a batch's or a counter's fields, which the
// gateway does not use); errors are json.Marshal of JSPubAckResponse.

// PubAck is what the store reads from a PubAck.
type PubAck struct {
	Seq       uint64 // the message's stream sequence
	Duplicate bool   // the stream already had a message with its Nats-Msg-Id (Seq is that message's)
}

// ParsePubAck reads the answer to a publish as jetstream.PublishMsg does:
// the hand parser when it understands all of it, encoding/json otherwise.
func ParsePubAck(data []byte) (PubAck, error) {
	ack, stream, ok := scanPubAck(data)
	if !ok {
		return decodePubAck(data)
	}
	if !stream {
		return PubAck{}, jetstream.ErrInvalidJSAck
	}
	return ack, nil
}

// pubAckJSON is nats.go's pubAckResponse (jetstream/publish.go): its
// apiResponse's fields and the embedded *PubAck, which stays nil when the
// answer has none of PubAck's fields.
type pubAckJSON struct {
	Type  string              `json:"type"`
	Error *jetstream.APIError `json:"error,omitempty"`
	*jetstream.PubAck
}

// decodePubAck is nats.go's reading of a PubAck (jetstream.publishMsg),
// line for line.
func decodePubAck(data []byte) (PubAck, error) {
	var r pubAckJSON
	if err := json.Unmarshal(data, &r); err != nil {
		return PubAck{}, jetstream.ErrInvalidJSAck
	}
	if r.Error != nil {
		return PubAck{}, fmt.Errorf("nats: %w", r.Error)
	}
	if r.PubAck == nil || r.Stream == "" {
		return PubAck{}, jetstream.ErrInvalidJSAck
	}
	return PubAck{Seq: r.Sequence, Duplicate: r.Duplicate}, nil
}

// scanPubAck reads a JSON object whose members are only "stream", "seq",
// "domain" and "duplicate", each at most once, in any order and with any
// JSON whitespace; strings without escapes and of printable ASCII, seq a
// plain unsigned integer that fits in a uint64, duplicate true or false.
// stream tells whether the object had a non-empty stream name. ok is false
// for anything else (an error, other members, escapes, a repeated member,
// malformed JSON): encoding/json decides those. Where ok is true,
// encoding/json reads the same (FuzzParsePubAck checks it).
func scanPubAck(data []byte) (ack PubAck, stream, ok bool) {
	const (
		sawStream = 1 << iota
		sawSeq
		sawDomain
		sawDuplicate
	)
	seen := 0
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return PubAck{}, false, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return PubAck{}, false, skipSpace(data, i+1) == len(data)
	}
	for {
		key, j, kok := scanPlainString(data, i)
		if !kok {
			return PubAck{}, false, false
		}
		i = skipSpace(data, j)
		if i >= len(data) || data[i] != ':' {
			return PubAck{}, false, false
		}
		i = skipSpace(data, i+1)
		var bit int
		switch string(key) { // no allocation: the compiler compares in place
		case "stream":
			bit = sawStream
			var s []byte
			if s, i, ok = scanPlainString(data, i); !ok {
				return PubAck{}, false, false
			}
			stream = len(s) > 0
		case "seq":
			bit = sawSeq
			if ack.Seq, i, ok = scanUint(data, i); !ok {
				return PubAck{}, false, false
			}
		case "domain":
			bit = sawDomain
			if _, i, ok = scanPlainString(data, i); !ok {
				return PubAck{}, false, false
			}
		case "duplicate":
			bit = sawDuplicate
			if ack.Duplicate, i, ok = scanBool(data, i); !ok {
				return PubAck{}, false, false
			}
		default:
			return PubAck{}, false, false
		}
		if seen&bit != 0 {
			return PubAck{}, false, false
		}
		seen |= bit
		i = skipSpace(data, i)
		if i >= len(data) {
			return PubAck{}, false, false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			if skipSpace(data, i+1) != len(data) {
				return PubAck{}, false, false
			}
			return ack, stream, true
		default:
			return PubAck{}, false, false
		}
	}
}

// skipSpace is the index of the first byte at or after i that is not JSON
// whitespace.
func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanPlainString reads a JSON string at i made of printable ASCII without
// escapes (what encoding/json returns unchanged), and the index after it.
func scanPlainString(data []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return data[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, i, false
		}
	}
	return nil, i, false
}

// scanUint reads a JSON integer at i that fits in a uint64: digits, no
// leading zero, followed by something that ends a number.
func scanUint(data []byte, i int) (n uint64, next int, ok bool) {
	j := i
	for j < len(data) && data[j] >= '0' && data[j] <= '9' {
		d := uint64(data[j] - '0')
		if n > (1<<64-1-d)/10 {
			return 0, i, false
		}
		n = n*10 + d
		j++
	}
	if j == i || (data[i] == '0' && j-i > 1) || !endsValue(data, j) {
		return 0, i, false
	}
	return n, j, true
}

// scanBool reads the JSON literal true or false at i.
func scanBool(data []byte, i int) (v bool, next int, ok bool) {
	rest := data[i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		v, next = true, i+4
	case len(rest) >= 5 && string(rest[:5]) == "false":
		v, next = false, i+5
	default:
		return false, i, false
	}
	return v, next, endsValue(data, next)
}

// endsValue tells whether a number or literal ending before data[i] is
// complete: followed by whitespace, a comma, a closing brace or nothing.
func endsValue(data []byte, i int) bool {
	if i == len(data) {
		return true
	}
	switch data[i] {
	case ' ', '\t', '\n', '\r', ',', '}':
		return true
	}
	return false
}
