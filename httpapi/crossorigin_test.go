package httpapi

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/internal/route"
)

// TestCrossOrigin: the state-changing requests a browser sends for a page
// of another origin are refused with a JSON 403 before they reach the core,
// on every method and route; reads, requests without browser headers and
// those of the gateway's own or a trusted origin are served as before.
func TestCrossOrigin(t *testing.T) {
	t.Parallel()
	cop, err := NewCrossOriginProtection([]string{"https://Trusted.Example/"})
	if err != nil {
		t.Fatal(err)
	}
	var mounted atomic.Int32
	s := startAPI(t, Options{CrossOrigin: cop, Mount: func(t *route.Table) {
		t.HandleFunc("/mounted", route.Authenticated, func(w http.ResponseWriter, _ *http.Request) {
			mounted.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}, http.MethodPost)
	}})
	self := s.srv.URL // http://127.0.0.1:port, the Host the client sends
	const evil = "http://evil.example"

	for _, rq := range []struct{ method, path, body string }{
		{"POST", "/messages/q", "x"},
		{"POST", "/msgs/q", "x"},
		{"POST", "/messages?qre=.", "x"},
		{"POST", "/messages/q/id?reply=ack", ""},
		{"DELETE", "/queues/q", ""},
		{"POST", "/queues/q/dead/respawn", ""},
		{"DELETE", "/queues/q/dead", ""},
		{"PUT", "/properties", "[]"},
		{"PATCH", "/props/q", `{"timeout":5}`},
		{"DELETE", "/properties/q", ""},
		{"POST", "/mounted", ""},
		{"POST", "/nowhere", ""},
	} {
		for _, hdr := range [][]string{
			{"Sec-Fetch-Site", "cross-site"},
			{"Sec-Fetch-Site", "same-site", "Origin", "http://a.127.0.0.1.nip.io"},
			{"Sec-Fetch-Site", "cross-site", "Origin", self}, // the browser's word wins
			{"Origin", evil},
			{"Origin", "null"},
			{"Origin", "https://trusted.example.evil"},
		} {
			s.do(rq.method, rq.path, rq.body, append(hdr, "Content-Type", "application/json")...).
				wantError(t, rq.method+" "+rq.path+" "+strings.Join(hdr, " "), http.StatusForbidden, "cross-origin request refused")
		}
	}
	queues := s.core.QueueCount()
	if queues != 0 || mounted.Load() != 0 {
		t.Fatalf("refused requests made %d queues, reached a mounted route %d times", queues, mounted.Load())
	}

	// Served: no browser header (LMQ clients, curl), the gateway's own
	// origin, a navigation, a trusted origin; and every read.
	for i, hdr := range [][]string{
		nil,
		{"Origin", self},
		{"Origin", self, "Sec-Fetch-Site", "same-origin"},
		{"Sec-Fetch-Site", "same-origin"},
		{"Sec-Fetch-Site", "none"},
		{"Origin", "https://trusted.example", "Sec-Fetch-Site", "cross-site"},
		{"Origin", "https://trusted.example"},
	} {
		what := strings.Join(hdr, " ")
		s.do("POST", "/messages/q", "m", append(hdr, "Content-Type", textPlain)...).want(t, "push "+what, 200, `{"accum":"no"}`)
		s.do("GET", "/messages/q?t=0", "", hdr...).want(t, "pull "+what, 200, "m")
		s.do("POST", "/mounted", "", hdr...).want(t, "mounted "+what, 204, "")
		if n := mounted.Load(); n != int32(i+1) {
			t.Errorf("mounted route: %d calls, want %d", n, i+1)
		}
	}
	for _, path := range []string{"/messages/q?t=0", "/queues", "/properties"} {
		a := s.do("GET", path, "", "Origin", evil, "Sec-Fetch-Site", "cross-site")
		if a.status == http.StatusForbidden {
			t.Errorf("GET %s cross-site: %d %s", path, a.status, a.body)
		}
	}
}

// TestCrossOriginDefault: without Options.CrossOrigin the API trusts no
// other origin.
func TestCrossOriginDefault(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	s.do("POST", "/messages/q", "x", "Origin", "https://trusted.example").wantError(t, "push", http.StatusForbidden, "cross-origin")
	s.do("POST", "/messages/q", "x").want(t, "push without Origin", 200, `{"accum":"no"}`)
}

func TestNormalizeOrigin(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://a.example":           "https://a.example",
		" HTTPS://A.Example/ ":        "https://a.example",
		"https://a.example:443":       "https://a.example",
		"http://a.example:80":         "http://a.example",
		"https://a.example:8443":      "https://a.example:8443",
		"http://a.example:443":        "http://a.example:443",
		"https://a.example:1443":      "https://a.example:1443",
		"http://[::1]:9980":           "http://[::1]:9980",
		"chrome-extension://abcdefgh": "chrome-extension://abcdefgh",
	} {
		if got, err := NormalizeOrigin(in); err != nil || got != want {
			t.Errorf("NormalizeOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a.example", "https://", "https://a.example/x", "https://a.example?x", "https://u@a.example", "//a.example"} {
		if got, err := NormalizeOrigin(in); err == nil {
			t.Errorf("NormalizeOrigin(%q) = %q, want an error", in, got)
		}
		if _, err := NewCrossOriginProtection([]string{in}); err == nil {
			t.Errorf("NewCrossOriginProtection(%q): no error", in)
		}
	}
}
