package e2e

import (
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// TestHTTPExposureWarns (issue 40, item 8): the HTTP API on every interface
// without authentication (LMQ's default, kept) is a WARN naming the
// listener, what anyone who reaches it can do and the flags that close it,
// as loud as an open RPC port; on loopback, or with a credential, no WARN.
func TestHTTPExposureWarns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		host  string
		extra []string
		warn  bool
	}{
		{"all interfaces, no auth", "0.0.0.0", nil, true},
		{"loopback, no auth", "127.0.0.1", nil, false},
		{"all interfaces, auth", "0.0.0.0", []string{"--auth-token", "secret"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gw := newOpsGateway(t)
			args := append([]string{"--http-listen", tc.host + ":0", "--log-level", "info"}, tc.extra...)
			gw.opsLaunch(nil, args...)
			// The start line comes after the exposure lines.
			if !testwait.Until(limHangGuard, func() bool { return strings.Contains(gw.Output(), "lmq-gateway serving") }) {
				t.Fatalf("no start line:\n%s", gw.Output())
			}
			out := gw.Output()
			if i := strings.Index(out, "HTTP API IS OPEN"); i >= 0 {
				out = out[strings.LastIndex(out[:i], "\n")+1:]
				out = out[:strings.Index(out+"\n", "\n")]
			}
			warned := strings.Contains(out, "HTTP API IS OPEN")
			if warned != tc.warn {
				t.Fatalf("HTTP exposure warning: %v, want %v:\n%s", warned, tc.warn, out)
			}
			if !tc.warn {
				return
			}
			for _, want := range []string{"level=WARN", "delete every queue", "--http-listen 127.0.0.1", "--auth-token", "--tokens", " http="} {
				if !strings.Contains(out, want) {
					t.Errorf("the warning lacks %q:\n%s", want, out)
				}
			}
		})
	}
}
