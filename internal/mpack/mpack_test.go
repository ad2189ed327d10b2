package mpack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// hostile are bodies that declare far more than they hold. The first two are
// the reproductions of issue 15: each made the general decoder allocate a
// slice of 2^32-1 elements and the process died of it.
var hostile = map[string][]byte{
	"issue-array":        []byte("\xdd\xff\xff\xff\xff\x92\x80\xa1x"),
	"issue-nested":       []byte("\x91\xdd\xff\xff\xff\xff\x80"),
	"count-1e7":          declaredArray(10_000_000, "\x92\x80\xa1x"),
	"count-1e8":          declaredArray(100_000_000, "\x92\x80\xa1x"),
	"map-4G":             []byte("\x91\x92\xdf\xff\xff\xff\xff\xa1k\xa1v\xa1x"),
	"str32-4G":           []byte("\x91\x92\x80\xdb\xff\xff\xff\xffabc"),
	"bin32-4G":           []byte("\x91\x92\x80\xc6\xff\xff\xff\xffabc"),
	"key-str32-4G":       []byte("\x91\x92\x81\xdb\xff\xff\xff\xffk\xa1v\xa0"),
	"array16-of-pairs":   []byte("\xdc\xff\xff\x92\x80\xa0"),
	"pair-declared-huge": []byte("\x91\xdd\xff\xff\xff\xff\x80\xa0"),
}

func declaredArray(n uint32, rest string) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{0xdd}, n), rest...)
}

// TestHostileCountsAllocateLittle decodes bodies that declare up to 2^32
// elements and checks that each is refused with ErrMalformed and that the
// whole run allocates next to nothing: the memory follows the bytes present.
func TestHostileCountsAllocateLittle(t *testing.T) {
	for name, body := range hostile {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		parts, err := DecodeParts(body, 0)
		runtime.ReadMemStats(&after)
		if err == nil || !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %d parts, err %v; want ErrMalformed", name, len(parts), err)
		}
		// A few KiB for the error text; 1 MiB leaves room for the runtime.
		if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
			t.Errorf("%s: decoding %d bytes allocated %d bytes", name, len(body), d)
		}
		t.Logf("%s: %v", name, err)
	}
}

func TestDecodeForms(t *testing.T) {
	// The same two parts in LMQ's raw dialect (strings everywhere), with bin
	// content (the gateway's own encoder), and with str8 and nil values.
	want := []Part{
		{Headers: []Header{{"content-type", "text/plain"}}, Body: []byte("one")},
		{Headers: []Header{{"user-agent", "curl"}}, Body: []byte("two")},
	}
	raw, err := msgpack.Marshal([]any{
		[]any{map[string]string{"content-type": "text/plain"}, "one"},
		[]any{map[string]string{"user-agent": "curl"}, "two"},
	})
	if err != nil {
		t.Fatal(err)
	}
	bin, err := msgpack.Marshal([]any{
		[]any{map[string]string{"content-type": "text/plain"}, []byte("one")},
		[]any{map[string]string{"user-agent": "curl"}, []byte("two")},
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"raw": raw, "bin": bin} {
		got, err := DecodeParts(b, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v", name, got)
		}
	}

	// nil headers, nil header value, nil content, str8/str16 and bin16 forms.
	b := []byte("\x94" +
		"\x92\xc0\xc0" +
		"\x92\x81\xd9\x01k\xc0\xc4\x00" +
		"\x92\x80\xda\x00\x02hi" +
		"\x92\xde\x00\x01\xa1a\xa1b\xc5\x00\x01z")
	got, err := DecodeParts(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	want = []Part{
		{},
		{Headers: []Header{{"k", ""}}, Body: []byte{}},
		{Body: []byte("hi")},
		{Headers: []Header{{"a", "b"}}, Body: []byte("z")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v", got)
	}
	// Bodies share the input but cannot grow into it.
	if cap(got[2].Body) != len(got[2].Body) {
		t.Errorf("body capacity %d, want %d", cap(got[2].Body), len(got[2].Body))
	}

	if got, err := DecodeParts([]byte{0x90}, 0); err != nil || len(got) != 0 {
		t.Errorf("empty array: %v, %v", got, err)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, c := range []struct {
		name, body, want string
	}{
		{"empty", "", "truncated"},
		{"not-array", "\x80", "array expected"},
		{"trailing", "\x90\x00", "1 bytes after"},
		{"not-pair", "\x91\x93\x80\xa0\xa0", "not a [headers, content] pair"},
		{"int-key", "\x91\x92\x81\x01\xa0\xa0", "header 1 name"},
		{"nil-key", "\x91\x92\x81\xc0\xa0\xa0", "nil where a name"},
		{"int-value", "\x91\x92\x81\xa1k\x01\xa0", "header 1 value"},
		{"int-content", "\x91\x92\x80\x01", "part 1 content"},
		{"array-headers", "\x91\x92\x90\xa0", "part 1 headers"},
		{"truncated-header", "\x91\x92\x80\xda\x00", "truncated header"},
		{"truncated-str", "\x91\x92\x80\xa5ab", "length 5 declared, only 2 bytes left"},
		{"unused-type", "\xc1", "found type byte 0xc1"},
	} {
		_, err := DecodeParts([]byte(c.body), 0)
		if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want ErrMalformed mentioning %q", c.name, err, c.want)
		}
	}
}

func TestMaxParts(t *testing.T) {
	b := bytes.Repeat([]byte("\x92\xc0\xc0"), 3)
	if _, err := DecodeParts(append([]byte{0x93}, b...), 2); !errors.Is(err, ErrTooMany) || !errors.Is(err, ErrMalformed) {
		t.Errorf("3 parts with a limit of 2: %v", err)
	}
	if got, err := DecodeParts(append([]byte{0x93}, b...), 3); err != nil || len(got) != 3 {
		t.Errorf("3 parts with a limit of 3: %d, %v", len(got), err)
	}
	// The limit applies to the declared count, before any part is read.
	if _, err := DecodeParts([]byte("\xdd\x00\x00\x10\x00"), 1000); !errors.Is(err, ErrMalformed) {
		t.Errorf("4096 declared: %v", err)
	}
}
