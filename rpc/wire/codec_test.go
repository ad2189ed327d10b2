package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/msgpacktest"
	"github.com/lmq-gateway/lmq-gateway/internal/mpack"
)

func readerOf(b []byte, lim Limits) *FrameReader {
	return NewFrameReader(bufio.NewReader(bytes.NewReader(b)), lim)
}

func mustFrame(t *testing.T, b []byte) Request {
	t.Helper()
	fr := readerOf(b, Limits{})
	frame, err := fr.ReadFrame()
	if err != nil {
		t.Fatalf("ReadFrame(% x): %v", b, err)
	}
	if !bytes.Equal(frame, b) {
		t.Fatalf("frame = % x, want % x", frame, b)
	}
	req, err := ParseRequest(frame, Limits{}.WithDefaults())
	if err != nil {
		t.Fatalf("ParseRequest: %v", err)
	}
	return req
}

func TestReadFrameRawDialect(t *testing.T) {
	// [0, 1, "pull", ["foo"]] as LMQ's clients send it: everything fixstr.
	b := []byte{0x94, 0x00, 0x01, 0xa4, 'p', 'u', 'l', 'l', 0x91, 0xa3, 'f', 'o', 'o'}
	req := mustFrame(t, b)
	if req.Notification || req.MsgID != 1 || req.Method != "pull" || !req.ParamsOK || len(req.Params) != 1 {
		t.Fatalf("req = %+v", req)
	}
	if s, ok := DecodeString(req.Params[0]); !ok || s != "foo" {
		t.Fatalf("param = %q %v", s, ok)
	}

	// str16 and str32 raw, msgid as uint32.
	long := strings.Repeat("x", 300)
	b = []byte{0x94, 0x00, 0xce, 0xff, 0xff, 0xff, 0xff, 0xa4, 'p', 'u', 's', 'h', 0x92}
	b = append(b, 0xda, 0x01, 0x2c)
	b = append(b, long...)
	b = append(b, 0xdb, 0, 0, 0, 3, 'a', 'b', 'c')
	req = mustFrame(t, b)
	if req.MsgID != math.MaxUint32 || req.Method != "push" || len(req.Params) != 2 {
		t.Fatalf("req = %+v", req)
	}
	if s, _ := DecodeString(req.Params[0]); s != long {
		t.Fatalf("str16 param decoded wrong")
	}
	if s, _ := DecodeString(req.Params[1]); s != "abc" {
		t.Fatalf("str32 param = %q", s)
	}
}

func TestReadFrameCurrentDialect(t *testing.T) {
	// [0, 7, str8 "push", [bin8 "q", str8 "hello"]]
	b := []byte{0x94, 0x00, 0x07, 0xd9, 0x04, 'p', 'u', 's', 'h', 0x92,
		0xc4, 0x01, 'q', 0xd9, 0x05, 'h', 'e', 'l', 'l', 'o'}
	req := mustFrame(t, b)
	if req.MsgID != 7 || req.Method != "push" || len(req.Params) != 2 {
		t.Fatalf("req = %+v", req)
	}
	if s, ok := DecodeString(req.Params[0]); !ok || s != "q" {
		t.Fatalf("bin8 name = %q %v", s, ok)
	}
	// The content keeps its own bytes, header included.
	if !bytes.Equal(req.Params[1], []byte{0xd9, 0x05, 'h', 'e', 'l', 'l', 'o'}) {
		t.Fatalf("content = % x", req.Params[1])
	}
	// Extensions (fixext and ext8/16/32), bin16/32, float32/64 and every int
	// width are all read.
	var c []byte
	c = append(c, 0x9f) // array of 15
	c = append(c, 0xd4, 0x01, 0xaa)
	c = append(c, 0xd8, 0x02)
	c = append(c, make([]byte, 16)...)
	c = append(c, 0xc7, 0x02, 0x05, 1, 2)
	c = append(c, 0xc8, 0x00, 0x01, 0x05, 1)
	c = append(c, 0xc9, 0x00, 0x00, 0x00, 0x01, 0x05, 1)
	c = append(c, 0xc5, 0x00, 0x01, 'x')
	c = append(c, 0xc6, 0x00, 0x00, 0x00, 0x01, 'y')
	c = append(c, 0xca, 0x3f, 0x80, 0, 0)
	c = append(c, 0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0)
	c = append(c, 0xcc, 0xff, 0xcd, 0xff, 0xff, 0xcf, 0xff, 0, 0, 0, 0, 0, 0, 0)
	c = append(c, 0xd0, 0x80, 0xd1, 0x80, 0x00, 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0)
	b = append([]byte{0x94, 0x00, 0x08, 0xa4, 'p', 'u', 's', 'h', 0x92, 0xa1, 'q'}, c...)
	req = mustFrame(t, b)
	if !bytes.Equal(req.Params[1], c) {
		t.Fatalf("content = % x\nwant      % x", req.Params[1], c)
	}
}

func TestParseRequest(t *testing.T) {
	lim := Limits{}.WithDefaults()
	ok := []struct {
		name string
		b    []byte
		want Request
	}{
		{"notification", []byte{0x93, 0x02, 0xa4, 'p', 'u', 's', 'h', 0x90},
			Request{Notification: true, Method: "push", Params: [][]byte{}, ParamsOK: true}},
		{"method not a string", []byte{0x94, 0x00, 0x05, 0x01, 0x90},
			Request{MsgID: 5, Params: [][]byte{}, ParamsOK: true}},
		{"params not an array", []byte{0x94, 0x00, 0x05, 0xa1, 'x', 0xa1, 'y'},
			Request{MsgID: 5, Method: "x"}},
	}
	for _, tc := range ok {
		got, err := ParseRequest(tc.b, lim)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: ParseRequest = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	bad := map[string][]byte{
		"not an array":      {0xa3, 'a', 'b', 'c'},
		"short array":       {0x92, 0x00, 0x01},
		"response type":     {0x94, 0x01, 0x01, 0xc0, 0xc0},
		"unknown type":      {0x94, 0x05, 0x01, 0xa1, 'x', 0x90},
		"negative type":     {0x94, 0xff, 0x01, 0xa1, 'x', 0x90},
		"msgid negative":    {0x94, 0x00, 0xff, 0xa1, 'x', 0x90},
		"msgid too big":     {0x94, 0x00, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0, 0xa1, 'x', 0x90},
		"msgid a string":    {0x94, 0x00, 0xa1, '1', 0xa1, 'x', 0x90},
		"request of 3":      {0x93, 0x00, 0x01, 0xa1, 'x'},
		"notification of 4": {0x94, 0x02, 0xa1, 'x', 0x90, 0xc0},
		"array of 5":        {0x95, 0x00, 0x01, 0xa1, 'x', 0x90, 0xc0},
	}
	for name, b := range bad {
		if _, err := ParseRequest(b, lim); !errors.Is(err, ErrNotRPC) {
			t.Errorf("%s: err = %v, want ErrNotRPC", name, err)
		}
	}
	// Long params arrays are refused without being split.
	b := append([]byte{0x94, 0x00, 0x01, 0xa1, 'x', 0xdc, 0xff, 0xff}, make([]byte, 0xffff)...)
	req, err := ParseRequest(b, lim)
	if err != nil || req.ParamsOK {
		t.Errorf("params of 65535: %+v, %v; want paramsOK false", req.ParamsOK, err)
	}
}

func TestReadFrameStream(t *testing.T) {
	// Two frames back to back, then a clean end.
	one := []byte{0x94, 0x00, 0x01, 0xa1, 'a', 0x90}
	two := []byte{0x93, 0x02, 0xa1, 'b', 0x91, 0xc0}
	fr := readerOf(append(append([]byte{}, one...), two...), Limits{})
	for _, want := range [][]byte{one, two} {
		got, err := fr.ReadFrame()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("ReadFrame = % x, %v; want % x", got, err, want)
		}
	}
	if _, err := fr.ReadFrame(); err != io.EOF {
		t.Fatalf("at end: %v, want io.EOF", err)
	}
	// A frame cut anywhere is an unexpected EOF.
	for i := 1; i < len(two); i++ {
		if _, err := readerOf(two[:i], Limits{}).ReadFrame(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut at %d: %v, want ErrUnexpectedEOF", i, err)
		}
	}
}

func TestReadFrameLimits(t *testing.T) {
	deep := func(n int) []byte { return append(bytes.Repeat([]byte{0x91}, n), 0xc0) }
	cases := []struct {
		name string
		b    []byte
		lim  Limits
		want error
	}{
		{"never-used byte", []byte{0xc1}, Limits{}, ErrMalformed},
		{"str32 4 GiB", []byte{0xdb, 0xff, 0xff, 0xff, 0xff, 'x'}, Limits{}, ErrTooLarge},
		{"bin32 4 GiB", []byte{0xc6, 0xff, 0xff, 0xff, 0xff, 'x'}, Limits{}, ErrTooLarge},
		{"ext32 4 GiB", []byte{0xc9, 0xff, 0xff, 0xff, 0xff, 1, 'x'}, Limits{}, ErrTooLarge},
		{"array32 4G elements", []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0}, Limits{}, ErrTooLarge},
		{"map32 4G pairs", []byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0xc0}, Limits{}, ErrTooLarge},
		{"array16 beyond a small frame", []byte{0xdc, 0x01, 0x00}, Limits{MaxFrameSize: 100}, ErrTooLarge},
		{"str beyond a small frame", append([]byte{0xda, 0x00, 0x80}, make([]byte, 128)...), Limits{MaxFrameSize: 100}, ErrTooLarge},
		{"nested 65", deep(65), Limits{}, ErrTooDeep},
		{"nested 5 of 4", deep(5), Limits{MaxDepth: 4}, ErrTooDeep},
		{"empty nested at limit+1", append(bytes.Repeat([]byte{0x91}, 4), 0x90), Limits{MaxDepth: 4}, ErrTooDeep},
	}
	for _, tc := range cases {
		_, err := readerOf(tc.b, tc.lim).ReadFrame()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	// At the limits themselves it passes.
	if _, err := readerOf(deep(64), Limits{}).ReadFrame(); err != nil {
		t.Errorf("nested 64: %v", err)
	}
	if _, err := readerOf(append([]byte{0xda, 0x00, 0x61}, make([]byte, 97)...), Limits{MaxFrameSize: 100}).ReadFrame(); err != nil {
		t.Errorf("frame of exactly 100 bytes: %v", err)
	}
}

// A declared length within the limit but never sent costs what was sent, not
// what was declared.
func TestReadFrameDeclaredLengthDoesNotAllocate(t *testing.T) {
	b := []byte{0x94, 0x00, 0x01, 0xa4, 'p', 'u', 's', 'h', 0x92, 0xa1, 'q', 0xdb, 0x03, 0xc0, 0x00, 0x00, 'x', 'y'}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := readerOf(b, Limits{}).ReadFrame(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err = %v", err)
		}
	}
	runtime.ReadMemStats(&after)
	// 10 attempts at a declared 60 MiB: well under 1 MiB each.
	if got := after.TotalAlloc - before.TotalAlloc; got > 10<<20 {
		t.Fatalf("allocated %d bytes for 10 truncated 60 MiB strings", got)
	}
}

func TestEncodeStrings(t *testing.T) {
	cases := []struct {
		n       int
		raw     []byte
		current []byte
	}{
		{0, []byte{0xa0}, []byte{0xa0}},
		{31, []byte{0xbf}, []byte{0xbf}},
		{32, []byte{0xda, 0x00, 0x20}, []byte{0xd9, 0x20}},
		{255, []byte{0xda, 0x00, 0xff}, []byte{0xd9, 0xff}},
		{256, []byte{0xda, 0x01, 0x00}, []byte{0xda, 0x01, 0x00}},
		{65535, []byte{0xda, 0xff, 0xff}, []byte{0xda, 0xff, 0xff}},
		{65536, []byte{0xdb, 0x00, 0x01, 0x00, 0x00}, []byte{0xdb, 0x00, 0x01, 0x00, 0x00}},
	}
	for _, tc := range cases {
		s := strings.Repeat("s", tc.n)
		if got := AppendStr(nil, s, DialectRaw); !bytes.HasPrefix(got, tc.raw) || len(got) != len(tc.raw)+tc.n {
			t.Errorf("raw str %d: header % x, want % x", tc.n, got[:min(len(got), 5)], tc.raw)
		}
		if got := AppendStr(nil, s, DialectCurrent); !bytes.HasPrefix(got, tc.current) || len(got) != len(tc.current)+tc.n {
			t.Errorf("current str %d: header % x, want % x", tc.n, got[:min(len(got), 5)], tc.current)
		}
		// Binaries are raw in LMQ's dialect and bin in the current one.
		if got := AppendBin(nil, []byte(s), DialectRaw); !bytes.HasPrefix(got, tc.raw) {
			t.Errorf("raw bin %d: header % x, want % x", tc.n, got[:min(len(got), 5)], tc.raw)
		}
		got := AppendBin(nil, []byte(s), DialectCurrent)
		var v []byte
		if err := msgpack.Unmarshal(got, &v); err != nil || len(v) != tc.n || (got[0] != 0xc4 && got[0] != 0xc5 && got[0] != 0xc6) {
			t.Errorf("current bin %d: % x, %v", tc.n, got[:min(len(got), 5)], err)
		}
	}
}

func TestEncodeNumbers(t *testing.T) {
	ints := []int64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64}
	for _, i := range ints {
		b := AppendInt(nil, i)
		var got int64
		if err := msgpack.Unmarshal(b, &got); err != nil || got != i {
			t.Errorf("AppendInt(%d) = % x decodes to %d, %v", i, b, got, err)
		}
		tok, err := parseHeader(b)
		if err != nil || tok.kind != kInt || tok.i != i || tok.hdr != len(b) {
			t.Errorf("parseHeader(AppendInt(%d)) = %+v, %v", i, tok, err)
		}
	}
	b := mpack.AppendUint(nil, math.MaxUint64)
	if tok, _ := parseHeader(b); tok.kind != kUint || tok.u != math.MaxUint64 {
		t.Errorf("MaxUint64: %+v", tok)
	}
	for _, f := range []float64{0, 0.25, -1e300, math.Inf(1)} {
		b := AppendFloat64(nil, f)
		if tok, _ := parseHeader(b); tok.kind != kFloat || tok.f != f {
			t.Errorf("float %v: %+v", f, tok)
		}
	}
}

func TestTranscode(t *testing.T) {
	// A current-dialect object with str8, bin8, bin16, nested.
	src, err := msgpack.Marshal(map[string]any{
		"a-key-long-enough-for-str8-xxxxxxxxxxxxxxxxxxxx": []any{[]byte("bin"), strings.Repeat("s", 40)},
		"big":  bytes.Repeat([]byte{1}, 300),
		"nest": map[string]any{"x": []any{nil, true, 1.5, -3, uint64(math.MaxUint64)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(msgpacktest.TypeBytes(t, src), []byte{0xd9}) || !bytes.Contains(msgpacktest.TypeBytes(t, src), []byte{0xc4}) {
		t.Fatalf("test input lacks str8/bin8: % x", msgpacktest.TypeBytes(t, src))
	}
	raw, err := Transcode(nil, src, DialectRaw, 64)
	if err != nil {
		t.Fatal(err)
	}
	msgpacktest.AssertRawDialect(t, raw)
	var got map[string]any
	if err := msgpack.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"a-key-long-enough-for-str8-xxxxxxxxxxxxxxxxxxxx": []any{"bin", strings.Repeat("s", 40)},
		"big":  string(bytes.Repeat([]byte{1}, 300)),
		"nest": map[string]any{"x": []any{nil, true, 1.5, int8(-3), uint64(math.MaxUint64)}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("raw transcoding decodes to\n%#v\nwant\n%#v", got, want)
	}
	// The current dialect copies as is.
	cur, err := Transcode([]byte{0x01}, src, DialectCurrent, 64)
	if err != nil || !bytes.Equal(cur[1:], src) || cur[0] != 0x01 {
		t.Fatalf("current transcoding changed the bytes: %v", err)
	}
	// Not exactly one object: refused.
	for name, b := range map[string][]byte{
		"empty":     {},
		"trailing":  {0xc0, 0xc0},
		"truncated": {0x92, 0x01},
		"short str": {0xa5, 'a'},
		"too deep":  append(bytes.Repeat([]byte{0x91}, 10), 0xc0),
		"bad byte":  {0x91, 0xc1},
	} {
		if _, err := Transcode(nil, b, DialectRaw, 8); err == nil {
			t.Errorf("%s: Transcode accepted % x", name, b)
		}
	}
}

func TestDecodeValue(t *testing.T) {
	src, _ := msgpack.Marshal([]any{"re", map[string]any{"pack": 0.5, "retry": 3, "timeout": nil}, []byte{1}, true})
	budget := 100
	v, rest, err := decodeValue(src, 64, &budget)
	if err != nil || len(rest) != 0 {
		t.Fatalf("decodeValue: %v, rest % x", err, rest)
	}
	want := []any{"re", map[string]any{"pack": 0.5, "retry": int64(3), "timeout": nil}, []byte{1}, true}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("got %#v", v)
	}
	budget = 5
	if _, _, err := decodeValue(src, 64, &budget); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("small budget: %v", err)
	}
	budget = 100
	if _, _, err := decodeValue(src, 2, &budget); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("small depth: %v", err)
	}
	for name, b := range map[string][]byte{
		"int key":     {0x81, 0x01, 0x02},
		"ext":         {0xd4, 0x01, 0x00},
		"truncated":   {0x92, 0x01},
		"huge array":  {0xdd, 0xff, 0xff, 0xff, 0xff},
		"short bin":   {0xc4, 0x05, 1},
		"never-used":  {0xc1},
		"nothing":     {},
		"map of lies": {0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'k'},
	} {
		budget := 1000
		if _, _, err := decodeValue(b, 64, &budget); err == nil {
			t.Errorf("%s: decodeValue accepted % x", name, b)
		}
	}
}

func TestAppendAny(t *testing.T) {
	v := []any{[]any{"accum/.*", map[string]any{"retry": int64(0), "pack": 30.0}}, []string{"a"}, uint8(1), float32(0.5)}
	for _, d := range []Dialect{DialectRaw, DialectCurrent} {
		b, err := AppendAny(nil, v, d)
		if err != nil {
			t.Fatal(err)
		}
		if d == DialectRaw {
			msgpacktest.AssertRawDialect(t, b)
		}
		// Keys sorted: "pack" before "retry".
		if i, j := bytes.Index(b, []byte("pack")), bytes.Index(b, []byte("retry")); i < 0 || j < i {
			t.Fatalf("keys not sorted: % x", b)
		}
	}
	// Unknown types go through vmihailenco/msgpack and are transcoded.
	type pair struct {
		Name string `msgpack:"name"`
		Data []byte `msgpack:"data"`
	}
	b, err := AppendAny(nil, pair{Name: strings.Repeat("n", 40), Data: []byte{1, 2}}, DialectRaw)
	if err != nil {
		t.Fatal(err)
	}
	msgpacktest.AssertRawDialect(t, b)
}

func TestParseDialect(t *testing.T) {
	for s, want := range map[string]Dialect{"raw": DialectRaw, "LMQ": DialectRaw, "": DialectRaw, "current": DialectCurrent, "new": DialectCurrent} {
		if got, err := ParseDialect(s); err != nil || got != want {
			t.Errorf("ParseDialect(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseDialect("bson"); err == nil {
		t.Error("ParseDialect(bson) accepted")
	}
}
