// Package wire is MessagePack-RPC as LMQ's clients speak it: it reads
// request frames from a stream, checks their envelope [0, msgid, method,
// params] (or a notification's [2, method, params]), decodes arguments, and
// encodes answers [1, msgid, error, result] in either MessagePack dialect. It
// knows nothing of queues or methods; package rpc serves the requests.
//
// Every byte it reads may be hostile. Memory follows the bytes actually
// received, never a length or count a frame declares: a declared length is
// checked against what is left of the frame (Limits.MaxFrameSize) before
// anything is allocated for it, payloads are read in chunks as they arrive,
// nesting is bounded (Limits.MaxDepth), and decoding into Go values has an
// element budget (Limits.MaxElements).
//
// It reads both dialects (LMQ's raw one and the current one with str8 and
// bin) and writes the one it is told (DialectRaw by default), so that
// client libraries older than the 2013 spec change keep working.
//
// Package internal/mpack is the other MessagePack reader: it reads compound
// bodies (stored or pushed over HTTP), not RPC frames, and holds the
// encoding primitives that the bench's no-op RPC server shares with this one.
package wire

import (
	"errors"
	"fmt"
	"strings"
)

// Dialect is the MessagePack dialect the server answers in. Both are always read.
type Dialect int

const (
	// DialectRaw is LMQ's dialect, from before the 2013 spec change: strings and
	// binaries are both "raw" (fixstr, str16, str32). Old client libraries
	// cannot read str8 or bin, so this is the default.
	DialectRaw Dialect = iota
	// DialectCurrent is today's MessagePack: str8 for short strings, bin for
	// binaries.
	DialectCurrent
)

func (d Dialect) String() string {
	switch d {
	case DialectRaw:
		return "raw"
	case DialectCurrent:
		return "current"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// ParseDialect maps a flag value to a Dialect: "raw" (or "lmq", "old") and
// "current" (or "new").
func ParseDialect(s string) (Dialect, error) {
	switch strings.ToLower(s) {
	case "raw", "lmq", "old", "":
		return DialectRaw, nil
	case "current", "new":
		return DialectCurrent, nil
	}
	return 0, fmt.Errorf("unknown MessagePack dialect %q (want raw or current)", s)
}

// Limits bound what one client can make the server hold. Zero fields take the
// defaults.
type Limits struct {
	// MaxFrameSize is the largest request frame in bytes (default 64 MiB). A
	// declared string, binary or container length that cannot fit in what is
	// left of it closes the connection before anything is allocated for it.
	MaxFrameSize int
	// MaxDepth is the deepest nesting of arrays and maps (default 64), counting
	// the frame's own array.
	MaxDepth int
	// MaxElements bounds the elements decoded into Go values for one argument
	// (properties, the default list; default 65536). Pushed content is never
	// decoded into Go values, only copied or re-encoded byte by byte.
	MaxElements int
}

// Default limits.
const (
	DefaultMaxFrameSize = 64 << 20
	DefaultMaxDepth     = 64
	DefaultMaxElements  = 1 << 16
)

// WithDefaults returns l with its zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxFrameSize <= 0 {
		l.MaxFrameSize = DefaultMaxFrameSize
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxElements <= 0 {
		l.MaxElements = DefaultMaxElements
	}
	return l
}

// Decoding errors. Any of them on a request frame (and ErrNotRPC) means the
// stream cannot be trusted further: the server closes the connection.
var (
	// ErrMalformed: not MessagePack, or an object cut short.
	ErrMalformed = errors.New("malformed MessagePack")
	// ErrTooLarge: a frame, declared length or element count beyond the
	// limits.
	ErrTooLarge = errors.New("MessagePack frame too large")
	// ErrTooDeep: nesting beyond Limits.MaxDepth.
	ErrTooDeep = errors.New("MessagePack nesting too deep")
)
