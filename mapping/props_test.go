package mapping

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// wantRendering asserts that parse accepts in, that what it returns renders
// as want, and that the rendering parses back to the same rendering (the
// gateway stores it). It returns the two results.
func wantRendering[T rendered](t *testing.T, parse func([]byte) (T, error), in, want string) (v, again T) {
	t.Helper()
	v, err := parse([]byte(in))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if got := string(v.JSON()); got != want {
		t.Fatalf("JSON() = %s, want %s", got, want)
	}
	again, err = parse(v.JSON())
	if err != nil || string(again.JSON()) != want {
		t.Fatalf("reparse: %s, %v", again.JSON(), err)
	}
	return v, again
}

// wantInvalid asserts that parse refuses in with an error that wraps
// ErrInvalidProps and reads msg, and that what it returns with the error is
// empty.
func wantInvalid[T rendered](t *testing.T, parse func([]byte) (T, error), in, msg string, empty func(T) bool) {
	t.Helper()
	v, err := parse([]byte(in))
	if err == nil {
		t.Fatalf("parse succeeded: %s", v.JSON())
	}
	if !errors.Is(err, ErrInvalidProps) {
		t.Errorf("error %v does not wrap ErrInvalidProps", err)
	}
	if err.Error() != msg {
		t.Errorf("error = %q\n want   %q", err.Error(), msg)
	}
	if !empty(v) {
		t.Errorf("returned with the error: %s", v.JSON())
	}
}

func TestParsePropsRender(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{`{}`, `{}`},
		{` { } `, `{}`},
		{`{"accum":30}`, `{"accum":30}`},
		{`{"retry":0}`, `{"retry":0}`},
		{`{"timeout":30,"retry":2,"accum":0}`, `{"accum":0,"retry":2,"timeout":30}`},
		{`{"accum":0.2504}`, `{"accum":0.25}`},
		{`{"accum":0.2506}`, `{"accum":0.251}`},
		{`{"accum":0.0004}`, `{"accum":0}`},
		{`{"accum":1.5e1}`, `{"accum":15}`},
		{`{"pack":0.5}`, `{"accum":0.5}`},
		{`{"pack":0.5,"accum":0.5}`, `{"accum":0.5}`},
		{`{"timeout":0.00001}`, `{"timeout":1e-05}`},
		{`{"timeout":0.2}`, `{"timeout":0.2}`},
		{`{"timeout":0.30000000000000004}`, `{"timeout":0.3}`},
		{`{"timeout":123456789}`, `{"timeout":123456789}`},
		// The largest accepted durations: MaxSeconds (10 years).
		{`{"timeout":315360000}`, `{"timeout":315360000}`},
		{`{"timeout":3.1536e8}`, `{"timeout":315360000}`},
		{`{"ttl":315360000}`, `{"ttl":315360000}`},
		{`{"accum":315360000}`, `{"accum":315360000}`},
		{`{"accum":315359999.9996}`, `{"accum":315360000}`},
		{`{"timeout":-0}`, `{"timeout":0}`},
		{`{"timeout":0.0}`, `{"timeout":0}`},
		{`{"timeout":1E400000}`, ``}, // invalid, see TestParsePropsInvalid
		{`{"retry":-0}`, `{"retry":0}`},
		{`{"retry":2147483646}`, `{"retry":2147483646}`},
		{`{"hooks":{}}`, `{"hooks":{}}`},
		{`{"hooks":{"pre_http_push":[]}}`, `{"hooks":{"pre_http_push":[]}}`},
		{`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["user-agent"]]]}}`,
			`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["user-agent"]]]}}`},
		{`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["User-Agent","X-A&B"]],["lmq_hook_preserve_header",[]]]},"retry":1}`,
			`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["user-agent","x-a&b"]],["lmq_hook_preserve_header",[]]]},"retry":1}`},
	}
	for _, tt := range tests {
		if tt.want == "" {
			continue
		}
		t.Run(tt.in, func(t *testing.T) {
			p, p2 := wantRendering(t, ParseProps, tt.in, tt.want)
			if !reflect.DeepEqual(p, p2) {
				t.Errorf("round trip: %#v, want %#v", p2, p)
			}
		})
	}
}

func TestParsePropsInvalid(t *testing.T) {
	tests := []struct {
		in, msg string // msg: the exact error text
	}{
		{``, `invalid properties: empty body`},
		{`null`, `invalid properties: expected a JSON object, got null`},
		{`[]`, `invalid properties: expected a JSON object, got an array`},
		{`"accum"`, `invalid properties: expected a JSON object, got a string`},
		{`3`, `invalid properties: expected a JSON object, got a number`},
		{`true`, `invalid properties: expected a JSON object, got a boolean`},
		{`{`, `invalid properties: malformed JSON: unexpected EOF`},
		{`{} {}`, `invalid properties: malformed JSON: data after the value`},
		{`{}x`, `invalid properties: malformed JSON: data after the value`},
		{`{"foo":1}`, `invalid properties: unknown key "foo" (known: accum, pack, retry, timeout, hooks, ttl, dead_letter, release_on_disconnect, priority, paused, max_inflight, dead_letter_queue)`},
		{`{"Retry":1}`, `invalid properties: unknown key "Retry" (known: accum, pack, retry, timeout, hooks, ttl, dead_letter, release_on_disconnect, priority, paused, max_inflight, dead_letter_queue)`},
		{`{"retry":2.5}`, `invalid properties: retry must be a non-negative integer (at most 2147483646)`},
		{`{"retry":2.0}`, `invalid properties: retry must be a non-negative integer (at most 2147483646)`},
		{`{"retry":2e0}`, `invalid properties: retry must be a non-negative integer (at most 2147483646)`},
		{`{"retry":"2"}`, `invalid properties: retry must be a non-negative integer (at most 2147483646)`},
		{`{"retry":-1}`, `invalid properties: retry must be a non-negative integer (at most 2147483646)`},
		{`{"retry":null}`, `invalid properties: retry must be a non-negative integer (at most 2147483646)`},
		{`{"retry":true}`, `invalid properties: retry must be a non-negative integer (at most 2147483646)`},
		{`{"retry":2147483647}`, `invalid properties: retry must be a non-negative integer (at most 2147483646)`},
		{`{"retry":99999999999999999999}`, `invalid properties: retry must be a non-negative integer (at most 2147483646)`},
		{`{"accum":-1}`, `invalid properties: accum must be a non-negative number (seconds)`},
		{`{"accum":"1"}`, `invalid properties: accum must be a non-negative number (seconds)`},
		{`{"pack":[]}`, `invalid properties: pack must be a non-negative number (seconds)`},
		{`{"timeout":-0.5}`, `invalid properties: timeout must be a non-negative number (seconds)`},
		{`{"timeout":null}`, `invalid properties: timeout must be a non-negative number (seconds)`},
		{`{"timeout":1E400000}`, `invalid properties: timeout must be a non-negative number (seconds)`},
		{`{"accum":1e308}`, `invalid properties: accum must be a number of seconds from 0 to 315360000 (10 years)`},
		{`{"timeout":1.7976931348623157e308}`, `invalid properties: timeout must be a number of seconds from 0 to 315360000 (10 years)`},
		// Durations past MaxSeconds overflowed the times computed from them
		// (year 2262): a window that closed at once, a message never delivered.
		{`{"accum":8e9}`, `invalid properties: accum must be a number of seconds from 0 to 315360000 (10 years)`},
		{`{"accum":1e10}`, `invalid properties: accum must be a number of seconds from 0 to 315360000 (10 years)`},
		{`{"pack":1e10}`, `invalid properties: pack must be a number of seconds from 0 to 315360000 (10 years)`},
		{`{"accum":315360000.0004}`, `invalid properties: accum must be a number of seconds from 0 to 315360000 (10 years)`},
		{`{"ttl":1e10}`, `invalid properties: ttl must be a number of seconds from 0 to 315360000 (10 years)`},
		{`{"ttl":9000000000}`, `invalid properties: ttl must be a number of seconds from 0 to 315360000 (10 years)`},
		{`{"timeout":315360000.001}`, `invalid properties: timeout must be a number of seconds from 0 to 315360000 (10 years)`},
		{`{"timeout":1e15}`, `invalid properties: timeout must be a number of seconds from 0 to 315360000 (10 years)`},
		{`{"ttl":-1}`, `invalid properties: ttl must be a non-negative number (seconds)`},
		{`{"accum":1,"pack":2}`, `invalid properties: accum and pack (its old name) are both given, with different values`},
		// Several faults: the first key in sorted order is reported.
		{`{"timeout":-1,"retry":-1}`, `invalid properties: retry must be a non-negative integer (at most 2147483646)`},
		{`{"hooks":[]}`, `invalid properties: hooks must be an object {"pre_http_push": [[HOOK, ARGS], ...]}`},
		{`{"hooks":null}`, `invalid properties: hooks must be an object {"pre_http_push": [[HOOK, ARGS], ...]}`},
		{`{"hooks":{"post_pull":[]}}`, `invalid properties: unknown hook point "post_pull" (known: pre_http_push)`},
		{`{"hooks":{"pre_http_push":{}}}`, `invalid properties: hooks.pre_http_push must be a list of [HOOK, ARGS] pairs`},
		{`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header"]]}}`, `invalid properties: hooks.pre_http_push[0]: a hook must be a [HOOK, ARGS] pair`},
		{`{"hooks":{"pre_http_push":["lmq_hook_preserve_header"]}}`, `invalid properties: hooks.pre_http_push[0]: a hook must be a [HOOK, ARGS] pair`},
		{`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",[],1]]}}`, `invalid properties: hooks.pre_http_push[0]: a hook must be a [HOOK, ARGS] pair`},
		{`{"hooks":{"pre_http_push":[[1,[]]]}}`, `invalid properties: hooks.pre_http_push[0]: a hook name must be a string`},
		{`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",[]],["my_hook",[]]]}}`, `invalid properties: hooks.pre_http_push[1]: unknown hook "my_hook" (known: lmq_hook_preserve_header)`},
		{`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header","user-agent"]]}}`, `invalid properties: hooks.pre_http_push[0]: the arguments of lmq_hook_preserve_header must be a list of header names`},
		{`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",[1]]]}}`, `invalid properties: hooks.pre_http_push[0]: the arguments of lmq_hook_preserve_header must be HTTP header names`},
		{`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",[""]]]}}`, `invalid properties: hooks.pre_http_push[0]: the arguments of lmq_hook_preserve_header must be HTTP header names`},
		{`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["user agent"]]]}}`, `invalid properties: hooks.pre_http_push[0]: the arguments of lmq_hook_preserve_header must be HTTP header names`},
		{`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["a:b"]]]}}`, `invalid properties: hooks.pre_http_push[0]: the arguments of lmq_hook_preserve_header must be HTTP header names`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			wantInvalid(t, ParseProps, tt.in, tt.msg, Props.IsZero)
		})
	}
}

func TestFormatSeconds(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{30, "30"}, {0.2, "0.2"}, {0, "0"}, {math.Copysign(0, -1), "0"}, {1e-05, "1e-05"},
		{0.0001, "0.0001"}, {100, "100"}, {1.5, "1.5"}, {0.1 + 0.2, "0.3"},
		{123456789012345, "123456789012345"}, {1e15, "1e+15"}, {1234567890123456, "1.23456789012346e+15"},
		{1e21, "1e+21"}, {2.5e-7, "2.5e-07"}, {1.0 / 3, "0.333333333333333"},
	}
	for _, tt := range tests {
		if got := formatSeconds(tt.in); got != tt.want {
			t.Errorf("formatSeconds(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestPropsFromMap(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]any
		want string // JSON of the result, "" = invalid
	}{
		{"empty", map[string]any{}, `{}`},
		{"int64 retry", map[string]any{"retry": int64(3)}, `{"retry":3}`},
		{"uint64 retry", map[string]any{"retry": uint64(0)}, `{"retry":0}`},
		{"int retry", map[string]any{"retry": 5}, `{"retry":5}`},
		{"int8 retry", map[string]any{"retry": int8(7)}, `{"retry":7}`},
		{"uint8 retry", map[string]any{"retry": uint8(200)}, `{"retry":200}`},
		{"float retry", map[string]any{"retry": 2.0}, ""},
		{"float32 retry", map[string]any{"retry": float32(2)}, ""},
		{"string retry", map[string]any{"retry": "2"}, ""},
		{"bytes retry", map[string]any{"retry": []byte("2")}, ""},
		{"negative retry", map[string]any{"retry": int64(-1)}, ""},
		{"huge uint retry", map[string]any{"retry": uint64(math.MaxUint64)}, ""},
		{"huge int retry", map[string]any{"retry": int64(math.MaxInt64)}, ""},
		{"float64 pack", map[string]any{"pack": 0.2504}, `{"accum":0.25}`},
		{"float32 accum", map[string]any{"accum": float32(0.2)}, `{"accum":0.2}`},
		{"float32 timeout", map[string]any{"timeout": float32(0.2)}, `{"timeout":0.2}`},
		{"int timeout", map[string]any{"timeout": int64(30)}, `{"timeout":30}`},
		{"uint timeout", map[string]any{"timeout": uint16(30)}, `{"timeout":30}`},
		{"NaN timeout", map[string]any{"timeout": math.NaN()}, ""},
		{"Inf timeout", map[string]any{"timeout": math.Inf(1)}, ""},
		{"negative accum", map[string]any{"accum": int64(-1)}, ""},
		{"bool accum", map[string]any{"accum": true}, ""},
		{"nil timeout", map[string]any{"timeout": nil}, ""},
		{"unknown", map[string]any{"x": 1}, ""},
		{"hooks bytes", map[string]any{"hooks": map[string]any{"pre_http_push": []any{
			[]any{[]byte("lmq_hook_preserve_header"), []any{[]byte("User-Agent"), "x-id"}}}}},
			`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["user-agent","x-id"]]]}}`},
		{"hooks map[any]any", map[string]any{"hooks": map[any]any{"pre_http_push": []any{
			[]any{"lmq_hook_preserve_header", []string{"a"}}}}},
			`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["a"]]]}}`},
		{"hooks map[any]any int key", map[string]any{"hooks": map[any]any{1: []any{}}}, ""},
		{"hooks empty", map[string]any{"hooks": map[string]any{}}, `{"hooks":{}}`},
		{"hooks wrong", map[string]any{"hooks": []any{}}, ""},
		{"max accum", map[string]any{"accum": uint64(MaxSeconds)}, `{"accum":315360000}`},
		{"max ttl", map[string]any{"ttl": int64(MaxSeconds)}, `{"ttl":315360000}`},
		{"huge uint accum", map[string]any{"accum": uint64(8e9)}, ""},
		{"huge int64 ttl", map[string]any{"ttl": int64(math.MaxInt64)}, ""},
		{"huge float timeout", map[string]any{"timeout": 1e10}, ""},
		{"huge float32 accum", map[string]any{"accum": float32(1e10)}, ""},
		{"NaN ttl", map[string]any{"ttl": math.NaN()}, ""},
		{"-Inf accum", map[string]any{"accum": math.Inf(-1)}, ""},
		{"all", map[string]any{"pack": 1.0, "retry": uint64(1), "timeout": 2.5},
			`{"accum":1,"retry":1,"timeout":2.5}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PropsFromMap(tt.in)
			if tt.want == "" {
				if !errors.Is(err, ErrInvalidProps) {
					t.Fatalf("PropsFromMap = %s, %v; want ErrInvalidProps", p.JSON(), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("PropsFromMap: %v", err)
			}
			if got := string(p.JSON()); got != tt.want {
				t.Errorf("JSON() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPropsMap(t *testing.T) {
	p, err := ParseProps([]byte(`{"pack":0.5,"retry":1,"timeout":3,"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["user-agent"]]]}}`))
	if err != nil {
		t.Fatal(err)
	}
	hooks := map[string]any{"pre_http_push": []any{[]any{"lmq_hook_preserve_header", []any{"user-agent"}}}}
	want := map[string]any{"pack": 0.5, "retry": int64(1), "timeout": 3.0, "hooks": hooks}
	if got := p.Map("pack"); !reflect.DeepEqual(got, want) {
		t.Errorf("Map(pack) = %#v\nwant %#v", got, want)
	}
	delete(want, "pack")
	want["accum"] = 0.5
	if got := p.Map(""); !reflect.DeepEqual(got, want) {
		t.Errorf("Map(\"\") = %#v\nwant %#v", got, want)
	}
	// What Map produces, PropsFromMap reads back.
	back, err := PropsFromMap(p.Map("pack"))
	if err != nil || !reflect.DeepEqual(back, p) {
		t.Errorf("PropsFromMap(Map()) = %#v, %v; want %#v", back, err, p)
	}
	if got := (Props{}).Map("accum"); len(got) != 0 || got == nil {
		t.Errorf("empty Map = %#v, want empty non-nil map", got)
	}
	if got := (Props{Retry: ptr(0)}).Map("accum"); !reflect.DeepEqual(got, map[string]any{"retry": int64(0)}) {
		t.Errorf("Map = %#v", got)
	}
}

func TestEffective(t *testing.T) {
	tests := []struct {
		e    Effective
		want string
	}{
		{Effective{Accum: 0, Retry: 2, Timeout: 30}, `{"accum":0,"retry":2,"timeout":30}`},
		{Effective{Accum: 0.25, Retry: 0, Timeout: 1e-05, Hooks: Hooks{}}, `{"accum":0.25,"retry":0,"timeout":1e-05}`},
		{Effective{Accum: 1, Retry: 3, Timeout: 0.5, Hooks: Hooks{"pre_http_push": {{Name: HookPreserveHeader, Args: []string{"user-agent"}}}}},
			`{"accum":1,"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["user-agent"]]]},"retry":3,"timeout":0.5}`},
	}
	for _, tt := range tests {
		if got := string(tt.e.JSON()); got != tt.want {
			t.Errorf("JSON() = %s, want %s", got, tt.want)
		}
	}
	m := Effective{Accum: 0.5, Retry: 2, Timeout: 30}.Map("pack")
	want := map[string]any{"pack": 0.5, "retry": int64(2), "timeout": 30.0}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("Map(pack) = %#v, want %#v", m, want)
	}
}

func TestMergeIsZero(t *testing.T) {
	base, _ := ParseProps([]byte(`{"accum":1,"retry":3,"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["a"]]]}}`))
	tests := []struct {
		patch, want string
	}{
		{`{}`, `{"accum":1,"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["a"]]]},"retry":3}`},
		{`{"retry":0}`, `{"accum":1,"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["a"]]]},"retry":0}`},
		{`{"timeout":5,"pack":2}`, `{"accum":2,"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["a"]]]},"retry":3,"timeout":5}`},
		{`{"hooks":{}}`, `{"accum":1,"hooks":{},"retry":3}`},
	}
	for _, tt := range tests {
		patch, err := ParseProps([]byte(tt.patch))
		if err != nil {
			t.Fatal(err)
		}
		got := base.Merge(patch)
		if s := string(got.JSON()); s != tt.want {
			t.Errorf("Merge(%s) = %s, want %s", tt.patch, s, tt.want)
		}
		// The result must not alias its inputs.
		*got.Retry = 99
		got.Hooks["pre_http_push"] = nil
		if *base.Retry != 3 || len(base.Hooks["pre_http_push"]) != 1 {
			t.Fatalf("Merge result aliases its receiver")
		}
		if patch.Retry != nil && *patch.Retry == 99 {
			t.Fatalf("Merge result aliases the patch")
		}
	}
	if !(Props{}).IsZero() {
		t.Error("Props{}.IsZero() = false")
	}
	for _, p := range []Props{{Retry: ptr(0)}, {Accum: ptr(0.0)}, {Timeout: ptr(0.0)}, {Hooks: Hooks{}}} {
		if p.IsZero() {
			t.Errorf("%s.IsZero() = true", p.JSON())
		}
	}
}

func TestPreservedHeaders(t *testing.T) {
	p, err := ParseProps([]byte(`{"hooks":{"pre_http_push":[
		["lmq_hook_preserve_header",["User-Agent","x-b"]],
		["lmq_hook_preserve_header",["x-a","user-agent"]]]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(p.Hooks.PreservedHeaders(), ","), "user-agent,x-b,x-a"; got != want {
		t.Errorf("PreservedHeaders() = %s, want %s", got, want)
	}
	if got := (Hooks{}).PreservedHeaders(); got != nil {
		t.Errorf("PreservedHeaders of no hooks = %v", got)
	}
	if got := Hooks(nil).PreservedHeaders(); got != nil {
		t.Errorf("PreservedHeaders of nil = %v", got)
	}
}

func TestDurations(t *testing.T) {
	tests := []struct {
		s    float64
		want time.Duration
	}{
		{0, 0}, {-1, 0}, {math.NaN(), 0}, {0.25, 250 * time.Millisecond}, {30, 30 * time.Second},
		{1e300, math.MaxInt64}, {math.Inf(1), math.MaxInt64},
	}
	for _, tt := range tests {
		e := Effective{Accum: tt.s, Timeout: tt.s}
		if got := e.AccumDuration(); got != tt.want {
			t.Errorf("AccumDuration(%v) = %v, want %v", tt.s, got, tt.want)
		}
		if got := e.TimeoutDuration(); got != tt.want {
			t.Errorf("TimeoutDuration(%v) = %v, want %v", tt.s, got, tt.want)
		}
	}
}

func TestBeyondLMQProps(t *testing.T) {
	p, err := ParseProps([]byte(`{"ttl":60,"dead_letter":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(p.JSON()); got != `{"dead_letter":true,"retry":2}` && got != `{"dead_letter":true,"ttl":60}` {
		t.Fatalf("JSON %s", got)
	}
	e := Resolve(nil, "q", p)
	if got := string(e.JSON()); got != `{"accum":0,"dead_letter":true,"retry":2,"timeout":30,"ttl":60}` {
		t.Fatalf("effective %s", got)
	}
	if got := string(Resolve(nil, "q", Props{}).JSON()); got != `{"accum":0,"retry":2,"timeout":30}` {
		t.Fatalf("LMQ text changed: %s", got)
	}
	for _, bad := range []string{`{"ttl":-1}`, `{"ttl":"1"}`, `{"dead_letter":1}`} {
		if _, err := ParseProps([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestReleaseOnDisconnectProp(t *testing.T) {
	p, err := ParseProps([]byte(`{"release_on_disconnect":true,"timeout":60}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.ReleaseOnDisconnect == nil || !*p.ReleaseOnDisconnect || p.IsZero() {
		t.Fatalf("parsed %+v", p)
	}
	if got := string(p.JSON()); got != `{"release_on_disconnect":true,"timeout":60}` {
		t.Fatalf("JSON %s", got)
	}
	if got := p.Map("")["release_on_disconnect"]; got != true {
		t.Fatalf("Map %v", got)
	}
	e := Resolve(nil, "q", p)
	if !e.ReleaseOnDisconnect {
		t.Fatal("effective: not set")
	}
	if got := string(e.JSON()); got != `{"accum":0,"release_on_disconnect":true,"retry":2,"timeout":60}` {
		t.Fatalf("effective %s", got)
	}
	// Off (the default, or set false) keeps LMQ's exact text.
	off := false
	if got := string(Resolve(nil, "q", Props{ReleaseOnDisconnect: &off}).JSON()); got != `{"accum":0,"retry":2,"timeout":30}` {
		t.Fatalf("LMQ text changed: %s", got)
	}
	// A queue's own false overrides a default list's true.
	defaults, err := ParseDefaultList([]byte(`[["^bound\\.",{"release_on_disconnect":true}]]`))
	if err != nil {
		t.Fatal(err)
	}
	if !Resolve(defaults, "bound.a", Props{}).ReleaseOnDisconnect {
		t.Fatal("default list entry not applied")
	}
	if Resolve(defaults, "bound.a", Props{ReleaseOnDisconnect: &off}).ReleaseOnDisconnect {
		t.Fatal("own false did not override the default list")
	}
	if Resolve(defaults, "other", Props{}).ReleaseOnDisconnect {
		t.Fatal("default list entry applied to a queue it does not match")
	}
	// RPC's update_props gives decoded MessagePack values.
	if mp, err := PropsFromMap(map[string]any{"release_on_disconnect": true}); err != nil || !*mp.ReleaseOnDisconnect {
		t.Fatalf("PropsFromMap: %+v %v", mp, err)
	}
	for _, bad := range []string{`{"release_on_disconnect":1}`, `{"release_on_disconnect":"true"}`, `{"release_on_disconnect":null}`} {
		if _, err := ParseProps([]byte(bad)); !errors.Is(err, ErrInvalidProps) {
			t.Errorf("%s: err %v, want ErrInvalidProps", bad, err)
		}
	}
}

func TestPriorityProperty(t *testing.T) {
	p, err := ParseProps([]byte(`{"priority":7}`))
	if err != nil || p.Priority == nil || *p.Priority != 7 {
		t.Fatalf("ParseProps priority = %v, %v", p.Priority, err)
	}
	if got := string(p.JSON()); got != `{"priority":7}` {
		t.Errorf("JSON = %s", got)
	}
	if got := p.Map("")["priority"]; got != int64(7) {
		t.Errorf("Map priority = %#v", got)
	}
	e := Resolve(nil, "q", p)
	if e.Priority != 7 || string(e.JSON()) != `{"accum":0,"priority":7,"retry":2,"timeout":30}` {
		t.Errorf("effective = %d %s", e.Priority, e.JSON())
	}
	// Unused, it stays out of the LMQ text.
	if got := string(Resolve(nil, "q", Props{}).JSON()); got != `{"accum":0,"retry":2,"timeout":30}` {
		t.Errorf("default JSON = %s", got)
	}
	for _, bad := range []string{`{"priority":10}`, `{"priority":-1}`, `{"priority":1.5}`, `{"priority":"3"}`, `{"priority":true}`} {
		if _, err := ParseProps([]byte(bad)); err == nil {
			t.Errorf("ParseProps(%s) accepted", bad)
		}
	}
	if _, err := PropsFromMap(map[string]any{"priority": uint8(3)}); err != nil {
		t.Errorf("PropsFromMap uint8: %v", err)
	}
	if _, err := PropsFromMap(map[string]any{"priority": uint64(300)}); err == nil {
		t.Error("PropsFromMap 300 accepted")
	}
}

func TestDeadLetterQueueProp(t *testing.T) {
	p, err := ParseProps([]byte(`{"dead_letter_queue":"orders-dlq","retry":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.DeadLetterQueue == nil || *p.DeadLetterQueue != "orders-dlq" || p.IsZero() {
		t.Fatalf("parsed %+v", p)
	}
	if got := string(p.JSON()); got != `{"dead_letter_queue":"orders-dlq","retry":1}` {
		t.Fatalf("JSON %s", got)
	}
	if got := p.Map("")["dead_letter_queue"]; got != "orders-dlq" {
		t.Fatalf("Map %v", got)
	}
	e := Resolve(nil, "orders", p)
	if e.DeadLetterQueue != "orders-dlq" {
		t.Fatalf("effective %+v", e)
	}
	if got := string(e.JSON()); got != `{"accum":0,"dead_letter_queue":"orders-dlq","retry":1,"timeout":30}` {
		t.Fatalf("effective %s", got)
	}
	// "" set on the queue overrides a default naming one, and keeps LMQ's text.
	defaults, err := ParseDefaultList([]byte(`[["^orders",{"dead_letter_queue":"all-dlq"}]]`))
	if err != nil {
		t.Fatal(err)
	}
	if got := Resolve(defaults, "orders.eu", Props{}).DeadLetterQueue; got != "all-dlq" {
		t.Fatalf("from the default list: %q", got)
	}
	none, err := ParseProps([]byte(`{"dead_letter_queue":""}`))
	if err != nil || none.DeadLetterQueue == nil || string(none.JSON()) != `{"dead_letter_queue":""}` {
		t.Fatalf("\"\": %+v %v", none, err)
	}
	if got := string(Resolve(defaults, "orders.eu", none).JSON()); got != `{"accum":0,"retry":2,"timeout":30}` {
		t.Fatalf("own \"\" did not override the default list: %s", got)
	}
	// Merge keeps it unless the patch sets it.
	if m := p.Merge(Props{Retry: ptr(3)}); m.DeadLetterQueue == nil || *m.DeadLetterQueue != "orders-dlq" {
		t.Fatalf("merge lost it: %+v", m)
	}
	// RPC's update_props: strings may come as []byte.
	if mp, err := PropsFromMap(map[string]any{"dead_letter_queue": []byte("dlq")}); err != nil || *mp.DeadLetterQueue != "dlq" {
		t.Fatalf("PropsFromMap: %+v %v", mp, err)
	}
	for _, bad := range []string{`{"dead_letter_queue":1}`, `{"dead_letter_queue":null}`, `{"dead_letter_queue":"a\u0001b"}`,
		`{"dead_letter_queue":"` + strings.Repeat("x", MaxQueueNameLen+1) + `"}`} {
		if _, err := ParseProps([]byte(bad)); !errors.Is(err, ErrInvalidProps) {
			t.Errorf("%s: err %v, want ErrInvalidProps", bad, err)
		}
	}
}
