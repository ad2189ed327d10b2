package migrate

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain":     "plain",
		"lmq/foo":   "lmq%2Ffoo",
		"a+b c":     "a%2Bb%20c",
		"x:y.z~_-":  "x%3Ay.z~_-",
		"日":         "%E6%97%A5",
		"100%":      "100%25",
		"q?t=1&x#y": "q%3Ft%3D1%26x%23y",
	} {
		if got := escape(in); got != want {
			t.Errorf("escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseStats(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]int64
	}{
		{`{"queues":{}}`, map[string]int64{}},
		{`{"active_nodes":[],"queues":[]}`, map[string]int64{}}, // LMQ's empty form
		{`{"queues":{"a/b":{"size":3,"props":{}},"c":{"size":0}}}`, map[string]int64{"a/b": 3, "c": 0}},
	} {
		got, err := parseStats([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.in, got, tc.want)
		}
	}
	if _, err := parseStats([]byte(`{"queues":"x"}`)); err == nil {
		t.Error("a malformed stats document was accepted")
	}
}

func TestParseNormalDelivery(t *testing.T) {
	h := http.Header{}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Lmq-Message-Id", "f0eca12e-19f2-4922-bcc9-6e42bd585937")
	h.Set("X-Lmq-Message-Type", "normal")
	h.Set("X-Lmq-Retry-Remaining", "1")
	h.Add("X-Trace", "t1")
	h.Add("X-Trace", "t2")
	h.Set("Server", "Cowboy") // not kept
	p, err := parseDelivery(h, []byte("hello"), []string{"x-trace"})
	if err != nil {
		t.Fatal(err)
	}
	want := gateway.Message{ContentType: "text/plain; charset=utf-8", Body: []byte("hello"),
		Kept: []gateway.Header{{Name: "x-trace", Value: "t1"}, {Name: "x-trace", Value: "t2"}}}
	if p.compound || p.retry != 1 || p.id != "f0eca12e-19f2-4922-bcc9-6e42bd585937" || !reflect.DeepEqual(p.msg, want) {
		t.Errorf("got %+v", p)
	}
}

var wantParts = []gateway.Message{
	{ContentType: "text/plain", Body: []byte("one")},
	{ContentType: "application/octet-stream", Body: []byte("two\r\n--x\r\n"), Kept: []gateway.Header{{Name: "user-agent", Value: "curl"}}},
}

func TestParseCompoundMsgpack(t *testing.T) {
	// LMQ's form: metadata as str, content as bin.
	body, err := msgpack.Marshal([]any{
		[]any{map[string]string{"content-type": "text/plain"}, []byte("one")},
		[]any{map[string]string{"content-type": "application/octet-stream", "user-agent": "curl"}, []byte("two\r\n--x\r\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/x-msgpack")
	h.Set("X-Lmq-Message-Id", "id1")
	h.Set("X-Lmq-Message-Type", "compound")
	h.Set("X-Lmq-Retry-Remaining", "2")
	p, err := parseDelivery(h, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p.compound || !reflect.DeepEqual(p.parts, wantParts) || p.size != 3+len("two\r\n--x\r\n") {
		t.Errorf("got %+v", p)
	}

	// The old dialect (everything raw/str) and the gateway's own encoding.
	old, _ := msgpack.Marshal([]any{
		[]any{map[string]string{"content-type": "text/plain"}, "one"},
		[]any{map[string]string{"content-type": "application/octet-stream", "user-agent": "curl"}, "two\r\n--x\r\n"},
	})
	own, _ := gateway.EncodeCompound(wantParts)
	for name, b := range map[string][]byte{"raw": old, "gateway": own} {
		parts, err := partsFromMsgpack(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(parts, wantParts) {
			t.Errorf("%s: got %+v", name, parts)
		}
	}
}

func TestParseCompoundMultipart(t *testing.T) {
	id := "0b8a3c52-8f7d-4d55-a8c6-3f0e2f3c7c11"
	body := "\r\n--" + id + "\r\ncontent-type: text/plain\r\ncontent-transfer-encoding: binary\r\n\r\none" +
		"\r\n--" + id + "\r\ncontent-type: application/octet-stream\r\nuser-agent: curl\r\ncontent-transfer-encoding: binary\r\n\r\ntwo\r\n--x\r\n" +
		"\r\n--" + id + "--\r\n"
	h := http.Header{}
	h.Set("Content-Type", "multipart/mixed; boundary="+id)
	h.Set("X-Lmq-Message-Id", id)
	h.Set("X-Lmq-Message-Type", "compound")
	p, err := parseDelivery(h, []byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.parts, wantParts) {
		t.Errorf("got %+v", p.parts)
	}
	if p.retry != -1 {
		t.Errorf("retry %d without the header", p.retry)
	}
	// Both forms of the same message have the same digest.
	mp, _ := gateway.EncodeCompound(wantParts)
	q, _ := partsFromMsgpack(mp)
	if messageSum(p) != messageSum(&pulled{compound: true, parts: q}) {
		t.Error("digest differs between the multipart and msgpack forms")
	}
}

func TestMessageSum(t *testing.T) {
	a := &pulled{msg: gateway.Message{ContentType: "a", Body: []byte("bc")}}
	b := &pulled{msg: gateway.Message{ContentType: "ab", Body: []byte("c")}}
	c := &pulled{compound: true, parts: []gateway.Message{{ContentType: "a", Body: []byte("bc")}}}
	if messageSum(a) == messageSum(b) || messageSum(a) == messageSum(c) {
		t.Error("different messages share a digest")
	}
	if messageSum(a) != messageSum(&pulled{id: "other", retry: 0, msg: gateway.Message{ContentType: "a", Body: []byte("bc")}}) {
		t.Error("the digest depends on the delivery")
	}
}

func TestPropsDiff(t *testing.T) {
	defaults, err := mapping.ParseDefaultList([]byte(`[["^acc",{"accum":2,"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["x-a"]]]}}],[".*",{"retry":5}]]`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ queue, want, own string }{
		{"plain", `{"accum":0,"retry":5,"timeout":30}`, `{}`},
		{"plain", `{"accum":0,"retry":2,"timeout":1.5}`, `{"retry":2,"timeout":1.5}`},
		{"acc1", `{"accum":2,"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["x-a"]]]},"retry":7,"timeout":30}`, `{"retry":7}`},
		{"acc2", `{"accum":0,"retry":2,"timeout":30}`, `{"accum":0,"hooks":{}}`}, // first match only: retry 2
	} {
		p, err := mapping.ParseProps([]byte(tc.want))
		if err != nil {
			t.Fatal(err)
		}
		want := mapping.Resolve(nil, tc.queue, p)
		base := mapping.Resolve(defaults, tc.queue, mapping.Props{})
		own, err := propsDiff(want, base)
		if err != nil {
			t.Fatal(err)
		}
		if string(own.JSON()) != tc.own {
			t.Errorf("%s %s: own %s, want %s", tc.queue, tc.want, own.JSON(), tc.own)
		}
		if got := mapping.Resolve(defaults, tc.queue, own); string(got.JSON()) != string(want.JSON()) {
			t.Errorf("%s: resolves to %s, want %s", tc.queue, got.JSON(), want.JSON())
		}
	}
}

func TestParseDefaultsLenient(t *testing.T) {
	l, skipped := parseDefaultsLenient([]byte(`[["^a(?=b)",{"retry":1}],["^b",{"accum":3}],[".*",{"timeout":5}]]`))
	if len(skipped) != 1 || len(l) != 2 || l[0].Pattern != "^b" {
		t.Fatalf("got %s, skipped %v", l.JSON(), skipped)
	}
	l, skipped = parseDefaultsLenient([]byte(`[]`))
	if len(l) != 0 || len(skipped) != 0 {
		t.Fatalf("empty list: %v %v", l, skipped)
	}
}

func TestIDToken(t *testing.T) {
	if got := idToken("f0eca12e-19f2-4922-bcc9-6e42bd585937"); got != "f0eca12e-19f2-4922-bcc9-6e42bd585937" {
		t.Errorf("uuid changed: %s", got)
	}
	if got := idToken("a.b*c"); got == "a.b*c" || len(got) != 33 {
		t.Errorf("unsafe id kept: %s", got)
	}
}

func TestNativeNames(t *testing.T) {
	n, err := mapping.NativeNames("lmq/foo")
	if err != nil {
		t.Fatal(err)
	}
	enc := mapping.EncodeName("lmq/foo")
	if n.Stream != "LMQS_34" || n.Subject != "lmq.q.34."+enc || n.NotifySubject != "lmq.n."+enc || n.Consumer != enc ||
		n.PropsKey != "q."+enc || n.QueuesKey != enc {
		t.Errorf("got %+v", n)
	}
}
