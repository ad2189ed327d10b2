package mapping

import (
	"errors"
	"reflect"
	"testing"
)

func TestDefaultListRoundTrip(t *testing.T) {
	tests := []struct{ in, want string }{
		{`[]`, `[]`},
		{` [ ] `, `[]`},
		{`[["accum/.*",{"accum":30}],[".*",{"retry":0}]]`, `[["accum/.*",{"accum":30}],[".*",{"retry":0}]]`},
		{`[["^a&b<c>$",{}]]`, `[["^a&b<c>$",{}]]`},
		{`[["a\\.b\"",{"pack":0.2504,"timeout":1e-5}]]`, `[["a\\.b\"",{"accum":0.25,"timeout":1e-05}]]`},
		{`[["日本",{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["user-agent"]]]}}]]`,
			`[["日本",{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["user-agent"]]]}}]]`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			wantRendering(t, ParseDefaultList, tt.in, tt.want)
		})
	}
	if got := string(DefaultList(nil).JSON()); got != `[]` {
		t.Errorf("nil list JSON() = %s, want []", got)
	}
}

func TestParseDefaultListInvalid(t *testing.T) {
	tests := []struct{ in, msg string }{
		{``, `invalid properties: empty body`},
		{`null`, `invalid properties: the default list must be a JSON array of [REGEXP, PROPS] pairs, got null`},
		{`{}`, `invalid properties: the default list must be a JSON array of [REGEXP, PROPS] pairs, got an object`},
		{`"x"`, `invalid properties: the default list must be a JSON array of [REGEXP, PROPS] pairs, got a string`},
		{`[`, `invalid properties: malformed JSON: unexpected EOF`},
		{`[] []`, `invalid properties: malformed JSON: data after the value`},
		{`[[".*"]]`, `invalid properties: default list entry 1: must be a [REGEXP, PROPS] pair`},
		{`[[".*",{},1]]`, `invalid properties: default list entry 1: must be a [REGEXP, PROPS] pair`},
		{`[".*",{}]`, `invalid properties: default list entry 1: must be a [REGEXP, PROPS] pair`},
		{`[[".*",{}],[1,{}]]`, `invalid properties: default list entry 2: the regexp must be a string`},
		{`[["(",{}]]`, `invalid properties: default list entry 1: invalid regexp "(": error parsing regexp: missing closing ): ` + "`(`"},
		{`[["a",[]]]`, `invalid properties: default list entry 1: the properties must be an object`},
		{`[["a",null]]`, `invalid properties: default list entry 1: the properties must be an object`},
		{`[["a",{"retry":1.5}]]`, `invalid properties: default list entry 1: retry must be a non-negative integer (at most 2147483646)`},
		{`[["a",{"accum":1e10}]]`, `invalid properties: default list entry 1: accum must be a number of seconds from 0 to 315360000 (10 years)`},
		{`[["a",{}],["b",{"ttl":9000000000}]]`, `invalid properties: default list entry 2: ttl must be a number of seconds from 0 to 315360000 (10 years)`},
		{`[["a",{"bogus":1}]]`, `invalid properties: default list entry 1: unknown key "bogus" (known: accum, pack, retry, timeout, hooks, ttl, dead_letter, release_on_disconnect, priority, paused, max_inflight, dead_letter_queue)`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			wantInvalid(t, ParseDefaultList, tt.in, tt.msg, func(l DefaultList) bool { return l == nil })
		})
	}
}

func TestDefaultListFromSlice(t *testing.T) {
	l, err := DefaultListFromSlice([]any{
		[]any{[]byte("accum/.*"), map[string]any{"pack": 30.0}},
		[]any{".*", map[any]any{"retry": uint8(0)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(l.JSON()), `[["accum/.*",{"accum":30}],[".*",{"retry":0}]]`; got != want {
		t.Errorf("JSON() = %s, want %s", got, want)
	}
	want := []any{
		[]any{"accum/.*", map[string]any{"pack": 30.0}},
		[]any{".*", map[string]any{"retry": int64(0)}},
	}
	if got := l.Slice("pack"); !reflect.DeepEqual(got, want) {
		t.Errorf("Slice(pack) = %#v\nwant %#v", got, want)
	}
	if got := DefaultList(nil).Slice("pack"); got == nil || len(got) != 0 {
		t.Errorf("empty Slice = %#v, want empty non-nil", got)
	}
	if l, err := DefaultListFromSlice([]any{}); err != nil || l == nil || len(l) != 0 {
		t.Errorf("DefaultListFromSlice([]) = %#v, %v", l, err)
	}

	bad := [][]any{
		{"x"},
		{[]any{"x"}},
		{[]any{1, map[string]any{}}},
		{[]any{"(", map[string]any{}}},
		{[]any{"\xff", map[string]any{}}},
		{[]any{"x", map[string]any{"retry": 1.0}}},
		{[]any{"x", []any{}}},
		{[]any{"x", map[any]any{1: 2}}},
	}
	for _, v := range bad {
		if l, err := DefaultListFromSlice(v); !errors.Is(err, ErrInvalidProps) {
			t.Errorf("DefaultListFromSlice(%#v) = %s, %v; want ErrInvalidProps", v, l.JSON(), err)
		}
	}
}

func TestResolve(t *testing.T) {
	defaults, err := ParseDefaultList([]byte(`[
		["accum/.*",{"accum":30}],
		["^fast",{"timeout":0.5,"retry":0}],
		["a",{"retry":7}],
		[".*",{"retry":0}]]`))
	if err != nil {
		t.Fatal(err)
	}
	hooked, _ := ParseProps([]byte(`{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["user-agent"]]]}}`))
	hookDefaults := DefaultList{{Pattern: "^h", Props: hooked}} // hand-built: Re is nil
	tests := []struct {
		name     string
		defaults DefaultList
		queue    string
		own      string
		want     string
	}{
		{"no defaults", nil, "q", `{}`, `{"accum":0,"retry":2,"timeout":30}`},
		{"no defaults, own", nil, "q", `{"retry":5,"pack":0.1}`, `{"accum":0.1,"retry":5,"timeout":30}`},
		// The first match wins; later matches (".*" retry 0) are not merged in.
		{"first match only", defaults, "accum/x", `{}`, `{"accum":30,"retry":2,"timeout":30}`},
		{"unanchored", defaults, "lmq/accum/x", `{}`, `{"accum":30,"retry":2,"timeout":30}`},
		{"anchored", defaults, "fast-q", `{}`, `{"accum":0,"retry":0,"timeout":0.5}`},
		{"anchored no match", defaults, "not-fast", `{}`, `{"accum":0,"retry":7,"timeout":30}`},
		{"catch all", defaults, "zzz", `{}`, `{"accum":0,"retry":0,"timeout":30}`},
		{"own over default", defaults, "accum/x", `{"accum":0,"timeout":1}`, `{"accum":0,"retry":2,"timeout":1}`},
		{"hooks from defaults", hookDefaults, "hq", `{}`,
			`{"accum":0,"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["user-agent"]]]},"retry":2,"timeout":30}`},
		{"own empty hooks override", hookDefaults, "hq", `{"hooks":{}}`, `{"accum":0,"retry":2,"timeout":30}`},
		{"hooks no match", hookDefaults, "q", `{}`, `{"accum":0,"retry":2,"timeout":30}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			own, err := ParseProps([]byte(tt.own))
			if err != nil {
				t.Fatal(err)
			}
			e := Resolve(tt.defaults, tt.queue, own)
			if got := string(e.JSON()); got != tt.want {
				t.Errorf("Resolve(%q, %s) = %s, want %s", tt.queue, tt.own, got, tt.want)
			}
		})
	}

	// Resolve must hand out copies: a caller editing the result must not
	// change the stored default list.
	e := Resolve(hookDefaults, "hq", Props{})
	e.Hooks["pre_http_push"][0].Args[0] = "changed"
	if got := hookDefaults[0].Props.Hooks.PreservedHeaders()[0]; got != "user-agent" {
		t.Errorf("Resolve result aliases the default list: %s", got)
	}

	if p, ok := defaults.Match("fast"); !ok || string(p.JSON()) != `{"retry":0,"timeout":0.5}` {
		t.Errorf("Match(fast) = %s, %v", p.JSON(), ok)
	}
	if p, ok := (DefaultList{}).Match("x"); ok || !p.IsZero() {
		t.Errorf("empty Match = %s, %v", p.JSON(), ok)
	}
	if _, ok := (DefaultList{{Pattern: "("}}).Match("("); ok {
		t.Errorf("an invalid hand-built pattern matched")
	}
}
