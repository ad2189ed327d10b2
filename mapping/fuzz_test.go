package mapping

import (
	"bytes"
	"errors"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/alloctest"
)

// maxJSONAlloc bounds what decoding n bytes of JSON may allocate. Decoding to
// Go values costs a map or slice header per "{}" or "[]", so the factor is
// generous; what matters is that it does not grow with a declared size.
func maxJSONAlloc(n int) uint64 { return 512*uint64(n) + 256<<10 }

// rendered is what a parser here returns: properties or a default list.
type rendered interface{ JSON() []byte }

// fuzzRoundTrip parses data with parse, which may allocate maxAlloc bytes at
// the most. A refusal must wrap ErrInvalidProps; what parses must render to
// JSON that parses back to the same rendering. ok reports whether data
// parsed.
func fuzzRoundTrip[T rendered](t *testing.T, data []byte, parse func([]byte) (T, error), maxAlloc uint64) (v T, ok bool) {
	t.Helper()
	var err error
	if a := alloctest.HeapAllocated(func() { v, err = parse(data) }); a > maxAlloc {
		t.Fatalf("parsing %d bytes allocated %d", len(data), a)
	}
	if err != nil {
		if !errors.Is(err, ErrInvalidProps) {
			t.Fatalf("error without ErrInvalidProps: %v", err)
		}
		return v, false
	}
	out := v.JSON()
	again, err := parse(out)
	if err != nil {
		t.Fatalf("rendering %s of %q does not parse: %v", out, data, err)
	}
	if b := again.JSON(); !bytes.Equal(b, out) {
		t.Fatalf("round trip of %q: %s then %s", data, out, b)
	}
	return v, true
}

var propsSeeds = []string{
	`{}`,
	`{"accum":0.25,"retry":3,"timeout":30,"ttl":60,"dead_letter":true}`,
	`{"pack":1.2504}`,
	`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["x-a","user-agent"]]]}}`,
	`{"retry":2.0}`,
	`{"retry":99999999999999999999}`,
	`{"accum":1e400}`,
	`{"timeout":-0}`,
	`{"ttl":315360001}`,
	`{"accum":1,"pack":2}`,
	`{"x":1}`,
	`{} {}`,
	`[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]`,
	`"\ud800"`,
	``,
}

// FuzzParseProps: no panic, only ErrInvalidProps, memory in proportion, and
// accepted properties render (PATCH answers, GET) to JSON that parses back to
// the same rendering.
func FuzzParseProps(f *testing.F) {
	for _, s := range propsSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, ParseProps, maxJSONAlloc(len(data)))
	})
}

// FuzzParseDefaultList is FuzzParseProps for the default-properties list.
func FuzzParseDefaultList(f *testing.F) {
	f.Add([]byte(`[]`))
	f.Add([]byte(`[["^acc",{"accum":2,"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["x-a"]]]}}],[".*",{"retry":5}]]`))
	f.Add([]byte(`[["(",{}]]`))
	f.Add([]byte(`[["a{1000}{1000}",{}]]`))
	f.Add([]byte(`[["((((((((((a*)*)*)*)*)*)*)*)*)*",{"retry":1}]]`))
	f.Add([]byte(`[[".*"]]`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[["\u0000",{"ttl":1}]]`))
	for _, s := range propsSeeds {
		f.Add([]byte(`[[".*",` + s + `]]`))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A compiled regexp costs more than its text; RE2's own limits
		// (repetition counts, program size) keep it in proportion.
		l, ok := fuzzRoundTrip(t, data, ParseDefaultList, 4*maxJSONAlloc(len(data)))
		if !ok {
			return
		}
		for _, e := range l {
			l.Match(e.Pattern)
		}
	})
}
