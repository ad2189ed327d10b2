package mapping

import (
	"bytes"
	"errors"
	"maps"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/alloctest"
	"github.com/lmq-gateway/lmq-gateway/internal/mpack"
)

// hostileCompound are the compound bodies of issue 15 (each made the old
// decoder allocate a slice of 2^32-1 elements, and killed the process on
// every pull of the message that carried it) and their like.
var hostileCompound = [][]byte{
	[]byte("\xdd\xff\xff\xff\xff\x92\x80\xa1x"),
	[]byte("\x91\xdd\xff\xff\xff\xff\x80"),
	[]byte("\xdd\x00\x98\x96\x80\x92\x80\xa1x"), // 10^7 declared
	[]byte("\xdd\x05\xf5\xe1\x00\x92\x80\xa1x"), // 10^8 declared
	[]byte("\x91\x92\xdf\xff\xff\xff\xff\xa1k\xa1v\xa1x"),
	[]byte("\x91\x92\x80\xc6\xff\xff\xff\xffabc"),
}

// TestDecodeCompoundHostile: the reproductions of issue 15 item 1 are refused
// with an error, allocating next to nothing (they used to take 0.5-5 GiB or
// kill the process).
func TestDecodeCompoundHostile(t *testing.T) {
	for _, b := range hostileCompound {
		var err error
		a := alloctest.HeapAllocated(func() { _, err = DecodeCompound(b, 0) })
		if err == nil || !errors.Is(err, mpack.ErrMalformed) {
			t.Errorf("% x: err %v, want ErrMalformed", b, err)
		}
		if a > 1<<20 {
			t.Errorf("% x: allocated %d bytes", b, a)
		}
	}
}

// TestDecodeCompoundLastHeaderWins: a map has one value per name; a body that
// repeats a name keeps the last, as the general decoder did.
func TestDecodeCompoundLastHeaderWins(t *testing.T) {
	b := []byte("\x91\x92\x84\xa1b\xa11\xa1a\xa12\xa1b\xa13\xac" + "content-type\xa1t\xa1x")
	got, err := DecodeCompound(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := Part{ContentType: "t", Body: []byte("x"), Kept: []Header{{"a", "2"}, {"b", "3"}}}
	if len(got) != 1 || got[0].ContentType != want.ContentType || !bytes.Equal(got[0].Body, want.Body) ||
		len(got[0].Kept) != 2 || got[0].Kept[0] != want.Kept[0] || got[0].Kept[1] != want.Kept[1] {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// FuzzDecodeCompound checks what deliver and a batch push do with a body: no
// panic, memory in proportion, and a decoded body that re-encodes (with
// EncodeCompound, as the accumulator writes it) to the same messages.
func FuzzDecodeCompound(f *testing.F) {
	for _, b := range hostileCompound {
		f.Add(b)
	}
	own, err := EncodeCompound([]Part{
		{ContentType: "text/plain", Body: []byte("one")},
		{Body: []byte("two"), Kept: []Header{{"user-agent", "curl"}, {"x-a", "1"}}},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(own)
	f.Add([]byte("\x90"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var msgs []Part
		var err error
		if a := alloctest.HeapAllocated(func() { msgs, err = DecodeCompound(data, 0) }); a > 64*uint64(len(data))+64<<10 {
			t.Fatalf("decoding %d bytes allocated %d", len(data), a)
		}
		if err != nil {
			if !errors.Is(err, mpack.ErrMalformed) {
				t.Fatalf("error without mpack.ErrMalformed: %v", err)
			}
			return
		}
		enc, err := EncodeCompound(msgs)
		if err != nil {
			t.Fatalf("EncodeCompound: %v", err)
		}
		again, err := DecodeCompound(enc, 0)
		if err != nil {
			t.Fatalf("re-encoded body does not decode: %v", err)
		}
		if len(again) != len(msgs) {
			t.Fatalf("%d messages, %d after the round trip", len(msgs), len(again))
		}
		for i := range msgs {
			a, b := msgs[i], again[i]
			if a.ContentType != b.ContentType || !bytes.Equal(a.Body, b.Body) || len(a.Kept) != len(b.Kept) {
				t.Fatalf("message %d: %+v, after the round trip %+v", i, a, b)
			}
			for j := range a.Kept {
				if a.Kept[j] != b.Kept[j] {
					t.Fatalf("message %d: %+v, after the round trip %+v", i, a, b)
				}
				if j > 0 && a.Kept[j-1].Name >= a.Kept[j].Name {
					t.Fatalf("message %d: headers not sorted and unique: %+v", i, a.Kept)
				}
			}
		}
	})
}

// TestEncodeCompound: the one encoder of the format writes a part's map
// with "content-type" first, then the kept headers in their order, one per
// name; what a map decoder reads back is what the stored compounds always
// held (the last value of a name, the content type over a kept
// "content-type"), and the same parts give the same bytes every time.
func TestEncodeCompound(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		part Part
		want []Header // the map, in order
	}{
		{"plain", Part{Body: []byte("x")}, nil},
		{"typed", Part{ContentType: "t/x", Body: []byte("x")}, []Header{{"content-type", "t/x"}}},
		{"kept in order", Part{Body: []byte("b"), ContentType: "t/x", Kept: []Header{{"x-b", "1"}, {"x-a", "2"}}},
			[]Header{{"content-type", "t/x"}, {"x-b", "1"}, {"x-a", "2"}}},
		{"repeated name", Part{Body: []byte("b"), Kept: []Header{{"x-a", "1"}, {"x-b", "2"}, {"x-a", "3"}}},
			[]Header{{"x-a", "3"}, {"x-b", "2"}}},
		{"kept content-type under the given one", Part{Body: []byte("b"), ContentType: "t/x", Kept: []Header{{"content-type", "t/y"}, {"x-a", "1"}}},
			[]Header{{"content-type", "t/x"}, {"x-a", "1"}}},
		{"kept content-type alone", Part{Body: []byte("b"), Kept: []Header{{"content-type", "t/y"}}}, []Header{{"content-type", "t/y"}}},
	} {
		b, err := EncodeCompound([]Part{c.part, {Body: []byte("second")}})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// The expected bytes, written out: array 2, [map, bin] per part
		// (every part here has a body: a nil one is written as nil).
		w := []byte{0x92, 0x92, 0x80 | byte(len(c.want))}
		for _, h := range c.want {
			w = append(w, 0xa0|byte(len(h.Name)))
			w = append(w, h.Name...)
			w = append(w, 0xa0|byte(len(h.Value)))
			w = append(w, h.Value...)
		}
		w = append(w, 0xc4, byte(len(c.part.Body)))
		w = append(w, c.part.Body...)
		w = append(w, "\x92\x80\xc4\x06second"...)
		if !bytes.Equal(b, w) {
			t.Errorf("%s: % x, want % x", c.name, b, w)
		}
		again, _ := EncodeCompound([]Part{c.part, {Body: []byte("second")}})
		if !bytes.Equal(again, b) {
			t.Errorf("%s: encoded twice, differs", c.name)
		}
		// A map decoder reads the map the stored compounds held before
		// (built as a Go map: kept headers, then the content type).
		var decoded [][2]any
		if err := msgpack.Unmarshal(b, &decoded); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		old := map[string]string{}
		for _, h := range c.part.Kept {
			old[h.Name] = h.Value
		}
		if c.part.ContentType != "" {
			old["content-type"] = c.part.ContentType
		}
		got := map[string]string{}
		for k, v := range decoded[0][0].(map[string]any) {
			got[k] = v.(string)
		}
		if !maps.Equal(got, old) {
			t.Errorf("%s: decodes to %v, want %v", c.name, got, old)
		}
	}
}
