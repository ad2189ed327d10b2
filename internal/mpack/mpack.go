// Package mpack reads the one MessagePack shape the gateway accepts from
// outside besides RPC frames: a compound body, an array of [headers, content]
// pairs. It is the body of a compound message in the stream, of a batch push
// (?batch=1 with application/x-msgpack) and of an old LMQ server's cf=msgpack
// delivery, so every byte of it may be hostile.
//
// A general decoder trusts the lengths and counts a body declares and
// allocates for them before reading what follows: nine bytes declaring an
// array of 2^32 elements took gigabytes. This reader checks every declared
// length and count against the bytes actually left before allocating
// anything, so its memory follows the size of its input.
package mpack

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrMalformed is wrapped by every error of DecodeParts.
var ErrMalformed = errors.New("malformed MessagePack")

// ErrTooMany is wrapped (together with ErrMalformed) when a body declares more
// parts than the caller allows.
var ErrTooMany = errors.New("too many parts")

// Header is one entry of a part's header map, as sent.
type Header struct {
	Name  string
	Value string
}

// Part is one [headers, content] pair.
type Part struct {
	// Headers are the entries of the header map in the order sent (a nil map
	// gives none); duplicate names are kept for the caller to resolve.
	Headers []Header
	// Body is the content. It shares memory with the decoded input, with its
	// capacity clipped so that appending to it cannot overwrite the input.
	Body []byte
}

// minPairSize is the smallest encoding of a pair: fixarray(2), nil, nil.
const minPairSize = 3

// DecodeParts decodes a compound body: a MessagePack array of [headers,
// content] pairs, where headers is a map (or nil) whose keys are strings and
// whose values are strings or nil, and content is a string, binary or nil.
// Strings may be str (any width, including the old "raw") or bin, as LMQ's
// codec and newer ones differ. Anything else, including bytes after the
// array, is an error wrapping ErrMalformed that says what and where.
//
// maxParts > 0 bounds the number of parts; a larger declared count is
// refused before any part is read (the error also wraps ErrTooMany).
func DecodeParts(b []byte, maxParts int) ([]Part, error) {
	r := reader{b: b}
	n, err := r.arrayLen(minPairSize)
	if err != nil {
		return nil, fail("compound body", 0, err)
	}
	if maxParts > 0 && n > maxParts {
		return nil, fmt.Errorf("%w: %w: %d parts, at most %d allowed", ErrMalformed, ErrTooMany, n, maxParts)
	}
	parts := make([]Part, 0, n)
	for i := range n {
		p, err := r.part(i + 1)
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	if left := r.left(); left > 0 {
		return nil, fmt.Errorf("%w: %d bytes after the compound body at offset %d", ErrMalformed, left, r.off)
	}
	return parts, nil
}

func (r *reader) part(i int) (Part, error) {
	var p Part
	where := func(what string) string { return fmt.Sprintf("part %d%s", i, what) }
	at := r.off
	n, err := r.arrayLen(1)
	if err != nil {
		return p, fail(where(""), at, err)
	}
	if n != 2 {
		return p, fmt.Errorf("%w: part %d is an array of %d, not a [headers, content] pair", ErrMalformed, i, n)
	}
	if r.peekNil() {
		r.off++
	} else {
		// An entry takes at least two bytes: a one-byte key and a nil.
		at = r.off
		m, err := r.mapLen(2)
		if err != nil {
			return p, fail(where(" headers"), at, err)
		}
		if m > 0 {
			p.Headers = make([]Header, 0, m)
		}
		for j := range m {
			at = r.off
			k, isNil, err := r.raw()
			if err == nil && isNil {
				err = errors.New("nil where a name was expected")
			}
			if err != nil {
				return p, fail(where(fmt.Sprintf(" header %d name", j+1)), at, err)
			}
			at = r.off
			v, _, err := r.raw()
			if err != nil {
				return p, fail(where(fmt.Sprintf(" header %d value", j+1)), at, err)
			}
			p.Headers = append(p.Headers, Header{Name: string(k), Value: string(v)})
		}
	}
	at = r.off
	body, _, err := r.raw()
	if err != nil {
		return p, fail(where(" content"), at, err)
	}
	p.Body = body[:len(body):len(body)]
	return p, nil
}

// reader walks a byte slice; off is where the next object starts.
type reader struct {
	b   []byte
	off int
}

func (r *reader) left() int { return len(r.b) - r.off }

// fail wraps err with what was being read and the offset where it starts.
func fail(what string, at int, err error) error {
	return fmt.Errorf("%w: %s at offset %d: %w", ErrMalformed, what, at, err)
}

func (r *reader) peekNil() bool { return r.left() > 0 && r.b[r.off] == 0xc0 }

// length reads the big-endian length field of size bytes after the type byte,
// moving past type byte and field.
func (r *reader) length(size int) (uint64, error) {
	if r.left() < 1+size {
		return 0, errors.New("truncated header")
	}
	f := r.b[r.off+1 : r.off+1+size]
	r.off += 1 + size
	switch size {
	case 1:
		return uint64(f[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(f)), nil
	}
	return uint64(binary.BigEndian.Uint32(f)), nil
}

// count reads an array or map header. Each of its n elements takes at least
// minSize bytes, so a count the remaining bytes cannot hold is refused here,
// before the caller allocates for it.
func (r *reader) count(fix, fixMask, c16, c32 byte, minSize uint64, what string) (int, error) {
	if r.left() == 0 {
		return 0, fmt.Errorf("truncated: %s expected", what)
	}
	c := r.b[r.off]
	var n uint64
	var err error
	switch {
	case c&^fixMask == fix:
		n = uint64(c & fixMask)
		r.off++
	case c == c16:
		n, err = r.length(2)
	case c == c32:
		n, err = r.length(4)
	default:
		return 0, fmt.Errorf("%s expected, found type byte 0x%02x", what, c)
	}
	if err != nil {
		return 0, err
	}
	if n*minSize > uint64(r.left()) {
		return 0, fmt.Errorf("%s of %d declared, only %d bytes left", what, n, r.left())
	}
	return int(n), nil
}

func (r *reader) arrayLen(minElem uint64) (int, error) {
	return r.count(0x90, 0x0f, 0xdc, 0xdd, minElem, "array")
}

// mapLen reads a map header; minEntry is the least bytes one key-value pair takes.
func (r *reader) mapLen(minEntry uint64) (int, error) {
	return r.count(0x80, 0x0f, 0xde, 0xdf, minEntry, "map")
}

// raw reads a str (fixstr, str8, str16, str32), a bin or a nil and returns its
// bytes, which share memory with the input.
func (r *reader) raw() (v []byte, isNil bool, err error) {
	if r.left() == 0 {
		return nil, false, errors.New("truncated: string expected")
	}
	c := r.b[r.off]
	var n uint64
	switch {
	case c == 0xc0:
		r.off++
		return nil, true, nil
	case c >= 0xa0 && c <= 0xbf:
		n = uint64(c & 0x1f)
		r.off++
	case c == 0xd9 || c == 0xc4:
		n, err = r.length(1)
	case c == 0xda || c == 0xc5:
		n, err = r.length(2)
	case c == 0xdb || c == 0xc6:
		n, err = r.length(4)
	default:
		return nil, false, fmt.Errorf("string or binary expected, found type byte 0x%02x", c)
	}
	if err != nil {
		return nil, false, err
	}
	if n > uint64(r.left()) {
		return nil, false, fmt.Errorf("length %d declared, only %d bytes left", n, r.left())
	}
	v = r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return v, false, nil
}
