package mpack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/alloctest"
)

// maxAlloc is what decoding n bytes may allocate: a Part (48 bytes) per three
// input bytes and a Header (32 bytes) plus its strings per two, so about 16
// times the input, plus a fixed allowance for error text and the runtime.
func maxAlloc(n int) uint64 { return 32*uint64(n) + 64<<10 }

// checkParts is the invariant of every decode: no panic, errors wrap
// ErrMalformed, memory in proportion to the input, and a result that
// re-encodes to bytes decoding to the same parts.
func checkParts(t testing.TB, data []byte) {
	var parts []Part
	var err error
	if a := alloctest.HeapAllocated(func() { parts, err = DecodeParts(data, 0) }); a > maxAlloc(len(data)) {
		t.Fatalf("decoding %d bytes allocated %d", len(data), a)
	}
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("error without ErrMalformed: %v", err)
		}
		return
	}
	total := 0
	for _, p := range parts {
		total += len(p.Body)
		for _, h := range p.Headers {
			total += len(h.Name) + len(h.Value)
		}
	}
	if total > len(data) || len(parts)*minPairSize > len(data) {
		t.Fatalf("%d parts holding %d bytes from %d bytes of input", len(parts), total, len(data))
	}
	again, err := DecodeParts(encode(parts), 0)
	if err != nil {
		t.Fatalf("re-encoded parts do not decode: %v", err)
	}
	if !equalParts(parts, again) {
		t.Fatalf("round trip changed the parts:\n%+v\n%+v", parts, again)
	}
}

// encode writes parts in the current dialect (str headers, bin content),
// independently of any other encoder in the module.
func encode(parts []Part) []byte {
	b := binary.BigEndian.AppendUint32([]byte{0xdd}, uint32(len(parts)))
	for _, p := range parts {
		b = append(b, 0x92)
		b = binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(len(p.Headers)))
		for _, h := range p.Headers {
			b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(len(h.Name)))
			b = append(b, h.Name...)
			b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(len(h.Value)))
			b = append(b, h.Value...)
		}
		b = binary.BigEndian.AppendUint32(append(b, 0xc6), uint32(len(p.Body)))
		b = append(b, p.Body...)
	}
	return b
}

// equalParts compares parts treating nil and empty alike (a nil map or nil
// content decodes to nil, an empty one to empty).
func equalParts(a, b []Part) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].Body, b[i].Body) || len(a[i].Headers) != len(b[i].Headers) {
			return false
		}
		if len(a[i].Headers) > 0 && !reflect.DeepEqual(a[i].Headers, b[i].Headers) {
			return false
		}
	}
	return true
}

func FuzzDecodeParts(f *testing.F) {
	for _, b := range hostile {
		f.Add(b)
	}
	f.Add([]byte("\x92\x92\x81\xac" + "content-type\xaatext/plain\xc4\x03one\x92\x80\xa3two"))
	f.Add([]byte("\x94\x92\xc0\xc0\x92\x81\xd9\x01k\xc0\xc4\x00\x92\x80\xda\x00\x02hi\x92\xde\x00\x01\xa1a\xa1b\xc5\x00\x01z"))
	f.Add([]byte("\x90"))
	f.Add([]byte("\x90\x00"))
	f.Fuzz(func(t *testing.T, data []byte) { checkParts(t, data) })
}
