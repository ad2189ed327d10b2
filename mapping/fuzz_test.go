package mapping

import (
	"bytes"
	"errors"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/internal/alloctest"
)

// maxJSONAlloc bounds what decoding n bytes of JSON may allocate. Decoding to
// Go values costs a map or slice header per "{}" or "[]", so the factor is
// generous; what matters is that it does not grow with a declared size.
func maxJSONAlloc(n int) uint64 { return 512*uint64(n) + 256<<10 }

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
		var p Props
		var err error
		if a := alloctest.HeapAllocated(func() { p, err = ParseProps(data) }); a > maxJSONAlloc(len(data)) {
			t.Fatalf("parsing %d bytes allocated %d", len(data), a)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidProps) {
				t.Fatalf("error without ErrInvalidProps: %v", err)
			}
			return
		}
		out := p.JSON()
		q, err := ParseProps(out)
		if err != nil {
			t.Fatalf("rendering %s of %q does not parse: %v", out, data, err)
		}
		if again := q.JSON(); !bytes.Equal(again, out) {
			t.Fatalf("round trip of %q: %s then %s", data, out, again)
		}
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
		var l DefaultList
		var err error
		// A compiled regexp costs more than its text; RE2's own limits
		// (repetition counts, program size) keep it in proportion.
		if a := alloctest.HeapAllocated(func() { l, err = ParseDefaultList(data) }); a > 4*maxJSONAlloc(len(data)) {
			t.Fatalf("parsing %d bytes allocated %d", len(data), a)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidProps) {
				t.Fatalf("error without ErrInvalidProps: %v", err)
			}
			return
		}
		out := l.JSON()
		m, err := ParseDefaultList(out)
		if err != nil {
			t.Fatalf("rendering %s of %q does not parse: %v", out, data, err)
		}
		if again := m.JSON(); !bytes.Equal(again, out) {
			t.Fatalf("round trip of %q: %s then %s", data, out, again)
		}
		for _, e := range l {
			l.Match(e.Pattern)
		}
	})
}
