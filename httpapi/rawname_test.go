package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
)

// rawRequest sends a request line as given, bytes unencoded, as the old
// go-lmq client did (Go's client would percent-encode them).
func (s *apiServer) rawRequest(method, target, body string) (int, string) {
	s.t.Helper()
	c, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		s.t.Fatal(err)
	}
	defer c.Close()
	req := method + " " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	if body != "" || method == http.MethodPost {
		req += "Content-Type: text/plain\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n"
	}
	req += "\r\n" + body
	if _, err := io.WriteString(c, req); err != nil {
		s.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRawUTF8QueueName: a queue name sent as raw UTF-8 in the request line
// (as the old go-lmq client did) names the same queue as its percent-encoded
// form, also next to an encoded %2F; a raw "/" still separates segments.
func TestRawUTF8QueueName(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	for _, tc := range []struct{ raw, encoded, queue string }{
		{"日本語", "%E6%97%A5%E6%9C%AC%E8%AA%9E", "日本語"},
		{"é+é", "%C3%A9+%C3%A9", "é+é"},
		{"x%2Fñ", "x%2F%C3%B1", "x/ñ"},
		{"%C3%A9-é", "%C3%A9-%C3%A9", "é-é"},
	} {
		// Raw push, encoded pull; then encoded push, raw pull.
		if status, body := s.rawRequest("POST", "/messages/"+tc.raw, "raw-push"); status != 200 {
			t.Errorf("raw push to %q: %d %s", tc.raw, status, body)
		}
		a := s.do("GET", "/messages/"+tc.encoded+"?t=0", "")
		a.want(t, "encoded pull of "+tc.queue, 200, "raw-push")
		if got := a.header.Get("X-Lmq-Queue-Name"); got != tc.queue {
			t.Errorf("%q: queue name %q, want %q", tc.raw, got, tc.queue)
		}
		s.do("POST", "/messages/"+tc.encoded, "encoded-push").want(t, "encoded push to "+tc.queue, 200, `{"accum":"no"}`)
		if status, body := s.rawRequest("GET", "/messages/"+tc.raw+"?t=0", ""); status != 200 || body != "encoded-push" {
			t.Errorf("raw pull from %q: %d %q, want the encoded push", tc.raw, status, body)
		}
	}
	// A raw slash is a path separator, as for any client: /messages/ü/x is
	// the reply route of queue "ü" (which wants ?reply=), not queue "ü/x".
	if status, _ := s.rawRequest("GET", "/messages/ü/x?t=0", ""); status != http.StatusMethodNotAllowed {
		t.Errorf("raw slash in a name: %d, want 405 (the reply route)", status)
	}
}

// TestAbsoluteFormTarget: a request target in absolute form
// ("http://host/messages/extra%2Fünï", as go-lmq sends names holding "/")
// keeps its encoded "/" next to raw UTF-8, as the origin form does.
func TestAbsoluteFormTarget(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	for _, tc := range []struct{ raw, encoded, queue string }{
		{"extra%2Fünï", "extra%2F%C3%BCn%C3%AF", "extra/ünï"},
		{"extra%2Fplain", "extra%2Fplain", "extra/plain"},
		{"日本語", "%E6%97%A5%E6%9C%AC%E8%AA%9E", "日本語"},
	} {
		for _, base := range []string{"http://x", "http://127.0.0.1:9980", "HTTP://user@x:1"} {
			if status, body := s.rawRequest("POST", base+"/messages/"+tc.raw, "abs"); status != 200 {
				t.Errorf("absolute-form push to %s%s: %d %s", base, tc.raw, status, body)
			}
			a := s.do("GET", "/messages/"+tc.encoded+"?t=0", "")
			a.want(t, "pull of "+tc.queue, 200, "abs")
			if got := a.header.Get("X-Lmq-Queue-Name"); got != tc.queue {
				t.Errorf("%s%s: queue %q, want %q", base, tc.raw, got, tc.queue)
			}
			s.do("POST", "/messages/"+tc.encoded, "back").want(t, "push to "+tc.queue, 200, `{"accum":"no"}`)
			if status, body := s.rawRequest("GET", base+"/messages/"+tc.raw+"?t=0", ""); status != 200 || body != "back" {
				t.Errorf("absolute-form pull from %s%s: %d %q", base, tc.raw, status, body)
			}
		}
	}
	s.do("GET", "/messages/extra?t=0", "").want(t, "queue extra", 204, "")
}

func TestTargetPath(t *testing.T) {
	t.Parallel()
	for uri, want := range map[string]string{
		"/messages/q":                       "/messages/q",
		"/messages/q?t=1":                   "/messages/q",
		"http://h/messages/a%2Fü?t=1":       "/messages/a%2Fü",
		"https://h:1/x":                     "/x",
		"http://u@h/x?y":                    "/x",
		"http://h/":                         "/",
		"http://h?x=/messages/q":            "",
		"http://h":                          "",
		"*":                                 "",
		"h:9980":                            "",
		"http://h/messages/q?u=http://z/a/": "/messages/q",
	} {
		got, ok := targetPath(uri)
		if got != want || ok != (want != "") {
			t.Errorf("targetPath(%q) = %q, %v; want %q", uri, got, ok, want)
		}
	}
}
