package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// kind is the type of one MessagePack token.
type kind uint8

const (
	kNil kind = iota
	kBool
	kInt // signed, fits int64
	kUint
	kFloat
	kStr // fixstr, str8, str16, str32 (the old "raw")
	kBin
	kExt
	kArray
	kMap
)

// token is one decoded MessagePack header: the type byte and what follows it up
// to (not including) the payload of a string, binary or extension.
type token struct {
	kind kind
	hdr  int    // header length in bytes, type byte included
	n    uint32 // payload length (str, bin, ext) or element count (array) or pair count (map)
	i    int64
	u    uint64
	f    float64
	b    bool
	ext  int8
}

// headerSize is the length of the header that starts with type byte c, or 0
// for the one byte the format never uses (0xc1).
func headerSize(c byte) int {
	switch {
	case c <= 0x7f, c >= 0xe0, c >= 0x80 && c <= 0xbf:
		return 1
	}
	switch c {
	case 0xc0, 0xc2, 0xc3:
		return 1
	case 0xc4, 0xcc, 0xd0, 0xd9: // bin8, uint8, int8, str8
		return 2
	case 0xc5, 0xcd, 0xd1, 0xda, 0xdc, 0xde: // 16-bit lengths and ints
		return 3
	case 0xc6, 0xce, 0xd2, 0xdb, 0xdd, 0xdf, 0xca: // 32-bit lengths, ints, float32
		return 5
	case 0xcf, 0xd3, 0xcb: // 64-bit ints, float64
		return 9
	case 0xc7: // ext8: length, type
		return 3
	case 0xc8: // ext16
		return 4
	case 0xc9: // ext32
		return 6
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext: type
		return 2
	}
	return 0
}

// parseHeader decodes the header at the start of h, which must hold at least
// headerSize(h[0]) bytes.
func parseHeader(h []byte) (token, error) {
	c := h[0]
	t := token{hdr: headerSize(c)}
	if t.hdr == 0 {
		return t, fmt.Errorf("%w: type byte 0x%02x", ErrMalformed, c)
	}
	if len(h) < t.hdr {
		return t, fmt.Errorf("%w: truncated header", ErrMalformed)
	}
	be16 := func() uint32 { return uint32(binary.BigEndian.Uint16(h[1:])) }
	be32 := func() uint32 { return binary.BigEndian.Uint32(h[1:]) }
	switch {
	case c <= 0x7f:
		t.kind, t.i = kInt, int64(c)
		return t, nil
	case c >= 0xe0:
		t.kind, t.i = kInt, int64(int8(c))
		return t, nil
	case c <= 0x8f:
		t.kind, t.n = kMap, uint32(c&0x0f)
		return t, nil
	case c <= 0x9f:
		t.kind, t.n = kArray, uint32(c&0x0f)
		return t, nil
	case c <= 0xbf:
		t.kind, t.n = kStr, uint32(c&0x1f)
		return t, nil
	}
	switch c {
	case 0xc0:
		t.kind = kNil
	case 0xc2, 0xc3:
		t.kind, t.b = kBool, c == 0xc3
	case 0xc4:
		t.kind, t.n = kBin, uint32(h[1])
	case 0xc5:
		t.kind, t.n = kBin, be16()
	case 0xc6:
		t.kind, t.n = kBin, be32()
	case 0xc7:
		t.kind, t.n, t.ext = kExt, uint32(h[1]), int8(h[2])
	case 0xc8:
		t.kind, t.n, t.ext = kExt, be16(), int8(h[3])
	case 0xc9:
		t.kind, t.n, t.ext = kExt, be32(), int8(h[5])
	case 0xca:
		t.kind, t.f = kFloat, float64(math.Float32frombits(be32()))
	case 0xcb:
		t.kind, t.f = kFloat, math.Float64frombits(binary.BigEndian.Uint64(h[1:]))
	case 0xcc:
		t.kind, t.i = kInt, int64(h[1])
	case 0xcd:
		t.kind, t.i = kInt, int64(be16())
	case 0xce:
		t.kind, t.i = kInt, int64(be32())
	case 0xcf:
		u := binary.BigEndian.Uint64(h[1:])
		if u > math.MaxInt64 {
			t.kind, t.u = kUint, u
		} else {
			t.kind, t.i = kInt, int64(u)
		}
	case 0xd0:
		t.kind, t.i = kInt, int64(int8(h[1]))
	case 0xd1:
		t.kind, t.i = kInt, int64(int16(binary.BigEndian.Uint16(h[1:])))
	case 0xd2:
		t.kind, t.i = kInt, int64(int32(be32()))
	case 0xd3:
		t.kind, t.i = kInt, int64(binary.BigEndian.Uint64(h[1:]))
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		t.kind, t.n, t.ext = kExt, 1<<(c-0xd4), int8(h[1])
	case 0xd9:
		t.kind, t.n = kStr, uint32(h[1])
	case 0xda:
		t.kind, t.n = kStr, be16()
	case 0xdb:
		t.kind, t.n = kStr, be32()
	case 0xdc:
		t.kind, t.n = kArray, be16()
	case 0xdd:
		t.kind, t.n = kArray, be32()
	case 0xde:
		t.kind, t.n = kMap, be16()
	case 0xdf:
		t.kind, t.n = kMap, be32()
	}
	return t, nil
}

// payloadLen is the number of bytes following the header that belong to this
// token itself (not to its elements).
func (t token) payloadLen() uint64 {
	switch t.kind {
	case kStr, kBin, kExt:
		return uint64(t.n)
	}
	return 0
}

// elements is the number of objects a container header announces.
func (t token) elements() uint64 {
	switch t.kind {
	case kArray:
		return uint64(t.n)
	case kMap:
		return 2 * uint64(t.n)
	}
	return 0
}

// FrameReader reads whole MessagePack objects from a stream, one per call,
// checking limits as it goes, so that memory follows the bytes actually
// received and never a declared length.
type FrameReader struct {
	br    *bufio.Reader
	lim   Limits
	stack []uint64
}

// NewFrameReader returns a reader of the frames br holds, within lim (zero
// fields take the defaults).
func NewFrameReader(br *bufio.Reader, lim Limits) *FrameReader {
	return &FrameReader{br: br, lim: lim.WithDefaults()}
}

// readChunk is how much a payload grows the buffer at a time: a client that
// declares a 60 MiB string and sends ten bytes costs ten bytes, not 60 MiB.
const readChunk = 64 << 10

// ReadFrame returns the bytes of the next complete object. It returns io.EOF
// when the stream ends cleanly between objects, and an error wrapping
// io.ErrUnexpectedEOF, ErrMalformed, ErrTooLarge or ErrTooDeep otherwise.
func (r *FrameReader) ReadFrame() ([]byte, error) {
	max := uint64(r.lim.MaxFrameSize)
	buf := make([]byte, 0, 64)
	r.stack = r.stack[:0]
	remaining := uint64(1) // objects still to read at the current level
	for {
		c, err := r.br.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) && len(buf) == 0 {
				return nil, io.EOF
			}
			return nil, eofIsUnexpected(err)
		}
		hs := headerSize(c)
		if hs == 0 {
			return nil, fmt.Errorf("%w: type byte 0x%02x", ErrMalformed, c)
		}
		if uint64(len(buf)+hs) > max {
			return nil, ErrTooLarge
		}
		start := len(buf)
		buf = append(buf, c)
		if hs > 1 {
			buf = append(buf, make([]byte, hs-1)...)
			if _, err := io.ReadFull(r.br, buf[start+1:]); err != nil {
				return nil, eofIsUnexpected(err)
			}
		}
		t, err := parseHeader(buf[start:])
		if err != nil {
			return nil, err
		}
		remaining--
		if n := t.payloadLen(); n > 0 {
			if n > max-uint64(len(buf)) {
				return nil, fmt.Errorf("%w: declared length %d", ErrTooLarge, n)
			}
			if buf, err = readPayload(r.br, buf, int(n)); err != nil {
				return nil, err
			}
		}
		if t.kind == kArray || t.kind == kMap {
			if len(r.stack)+1 > r.lim.MaxDepth {
				return nil, ErrTooDeep
			}
			// Every element takes at least one byte, so a count larger than
			// what is left of the frame is a lie; refuse it now.
			if n := t.elements(); n > 0 {
				if n > max-uint64(len(buf)) {
					return nil, fmt.Errorf("%w: declared %d elements", ErrTooLarge, n)
				}
				r.stack = append(r.stack, remaining)
				remaining = n
			}
		}
		for remaining == 0 {
			if len(r.stack) == 0 {
				return buf, nil
			}
			remaining = r.stack[len(r.stack)-1]
			r.stack = r.stack[:len(r.stack)-1]
		}
	}
}

func readPayload(br *bufio.Reader, buf []byte, n int) ([]byte, error) {
	for n > 0 {
		chunk := min(n, readChunk)
		buf = slices.Grow(buf, chunk)
		m, err := io.ReadFull(br, buf[len(buf):len(buf)+chunk])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, eofIsUnexpected(err)
		}
		n -= m
	}
	return buf, nil
}

func eofIsUnexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// walk visits the one object at the start of src, token by token, and returns
// its length. It checks everything ReadFrame checks, so it is safe on bytes of
// unknown origin (stored content). visit, if not nil, gets each token with its
// header bytes and payload.
func walk(src []byte, maxDepth int, visit func(t token, hdr, payload []byte)) (int, error) {
	var stack []uint64
	remaining := uint64(1)
	pos := 0
	for {
		if pos >= len(src) {
			return 0, fmt.Errorf("%w: truncated", ErrMalformed)
		}
		t, err := parseHeader(src[pos:])
		if err != nil {
			return 0, err
		}
		hdr := src[pos : pos+t.hdr]
		pos += t.hdr
		n := t.payloadLen()
		if n > uint64(len(src)-pos) {
			return 0, fmt.Errorf("%w: truncated payload", ErrMalformed)
		}
		payload := src[pos : pos+int(n)]
		pos += int(n)
		if visit != nil {
			visit(t, hdr, payload)
		}
		remaining--
		if t.kind == kArray || t.kind == kMap {
			if len(stack)+1 > maxDepth {
				return 0, ErrTooDeep
			}
			if n := t.elements(); n > 0 {
				if n > uint64(len(src)-pos) {
					return 0, fmt.Errorf("%w: truncated container", ErrMalformed)
				}
				stack = append(stack, remaining)
				remaining = n
			}
		}
		for remaining == 0 {
			if len(stack) == 0 {
				return pos, nil
			}
			remaining = stack[len(stack)-1]
			stack = stack[:len(stack)-1]
		}
	}
}

// Transcode appends the single object src holds to dst in dialect d. In the
// raw dialect str8 and bin become raw; otherwise bytes are copied as they are.
// It fails when src is not exactly one well-formed object.
func Transcode(dst, src []byte, d Dialect, maxDepth int) ([]byte, error) {
	out := dst
	n, err := walk(src, maxDepth, func(t token, hdr, payload []byte) {
		if d == DialectRaw && (hdr[0] == 0xd9 || t.kind == kBin) {
			out = appendStrHeader(out, len(payload), DialectRaw)
		} else {
			out = append(out, hdr...)
		}
		out = append(out, payload...)
	})
	if err != nil {
		return dst, err
	}
	if n != len(src) {
		return dst, fmt.Errorf("%w: %d bytes after the object", ErrMalformed, len(src)-n)
	}
	return out, nil
}

// splitArray returns the raw bytes of each element of the array at the start
// of b, refusing arrays longer than maxLen without looking at them.
func splitArray(b []byte, maxLen, maxDepth int) ([][]byte, bool) {
	if len(b) == 0 {
		return nil, false
	}
	t, err := parseHeader(b)
	if err != nil || t.kind != kArray || t.n > uint32(maxLen) {
		return nil, false
	}
	elems := make([][]byte, 0, t.n)
	pos := t.hdr
	for range t.n {
		n, err := walk(b[pos:], maxDepth, nil)
		if err != nil {
			return nil, false
		}
		elems = append(elems, b[pos:pos+n])
		pos += n
	}
	return elems, true
}

// DecodeString reads a string given as str (any width) or bin: old clients
// send names as raw, newer ones may send bytes as bin.
func DecodeString(b []byte) (string, bool) {
	if len(b) == 0 {
		return "", false
	}
	t, err := parseHeader(b)
	if err != nil || (t.kind != kStr && t.kind != kBin) || uint64(len(b)-t.hdr) < uint64(t.n) {
		return "", false
	}
	return string(b[t.hdr : t.hdr+int(t.n)]), true
}

// DecodeNumber reads an integer or a float as float64.
func DecodeNumber(b []byte) (float64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	t, err := parseHeader(b)
	if err != nil {
		return 0, false
	}
	switch t.kind {
	case kInt:
		return float64(t.i), true
	case kUint:
		return float64(t.u), true
	case kFloat:
		return t.f, true
	}
	return 0, false
}

// decodeUint32 reads a non-negative integer that fits 32 bits (a msgid).
func decodeUint32(b []byte) (uint32, bool) {
	if len(b) == 0 {
		return 0, false
	}
	t, err := parseHeader(b)
	if err != nil || t.kind != kInt || t.i < 0 || t.i > math.MaxUint32 {
		return 0, false
	}
	return uint32(t.i), true
}

// DecodeValue decodes b, one argument of a request, into plain Go values
// (see decodeValue) within lim's MaxDepth and MaxElements; zero fields of
// lim take the defaults.
func DecodeValue(b []byte, lim Limits) (any, error) {
	lim = lim.WithDefaults()
	budget := lim.MaxElements
	v, _, err := decodeValue(b, lim.MaxDepth, &budget)
	return v, err
}

// decodeValue decodes the object at the start of b into plain Go values: nil,
// bool, int64, uint64 (only above MaxInt64), float64, string (str/raw), []byte
// (bin), []any and map[string]any (keys must be str or bin). Extensions are
// refused. *budget is decremented per element so that a frame of many tiny
// elements cannot expand into a huge tree.
func decodeValue(b []byte, depth int, budget *int) (any, []byte, error) {
	if depth <= 0 {
		return nil, nil, ErrTooDeep
	}
	if *budget <= 0 {
		return nil, nil, fmt.Errorf("%w: too many elements", ErrTooLarge)
	}
	*budget--
	if len(b) == 0 {
		return nil, nil, fmt.Errorf("%w: truncated", ErrMalformed)
	}
	t, err := parseHeader(b)
	if err != nil {
		return nil, nil, err
	}
	rest := b[t.hdr:]
	if uint64(len(rest)) < t.payloadLen() {
		return nil, nil, fmt.Errorf("%w: truncated payload", ErrMalformed)
	}
	payload, rest := rest[:t.payloadLen()], rest[t.payloadLen():]
	switch t.kind {
	case kNil:
		return nil, rest, nil
	case kBool:
		return t.b, rest, nil
	case kInt:
		return t.i, rest, nil
	case kUint:
		return t.u, rest, nil
	case kFloat:
		return t.f, rest, nil
	case kStr:
		return string(payload), rest, nil
	case kBin:
		return slices.Clone(payload), rest, nil
	case kExt:
		return nil, nil, fmt.Errorf("%w: extension type %d not expected here", ErrMalformed, t.ext)
	case kArray:
		if uint64(t.n) > uint64(len(rest)) || int(t.n) > *budget {
			return nil, nil, fmt.Errorf("%w: array of %d", ErrTooLarge, t.n)
		}
		arr := make([]any, 0, t.n)
		for range t.n {
			var v any
			if v, rest, err = decodeValue(rest, depth-1, budget); err != nil {
				return nil, nil, err
			}
			arr = append(arr, v)
		}
		return arr, rest, nil
	case kMap:
		if 2*uint64(t.n) > uint64(len(rest)) || 2*int(t.n) > *budget {
			return nil, nil, fmt.Errorf("%w: map of %d", ErrTooLarge, t.n)
		}
		m := make(map[string]any, t.n)
		for range t.n {
			k, ok := DecodeString(rest)
			if !ok {
				return nil, nil, fmt.Errorf("%w: map key is not a string", ErrMalformed)
			}
			*budget--
			n, _ := walk(rest, 1, nil)
			var v any
			if v, rest, err = decodeValue(rest[n:], depth-1, budget); err != nil {
				return nil, nil, err
			}
			m[k] = v
		}
		return m, rest, nil
	}
	return nil, nil, fmt.Errorf("%w: unknown token", ErrMalformed)
}
