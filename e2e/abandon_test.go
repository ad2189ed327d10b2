package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// TestOpsAbandonedPull: a long-poll whose client hangs up while waiting is
// logged and counted as 499 (nginx's "client closed request"), not as an
// empty 200, and is not a pull; the queue's next message still goes to the
// next client.
func TestOpsAbandonedPull(t *testing.T) {
	t.Parallel()
	gw := newOpsGateway(t)
	gw.opsLaunch(nil, "--http-listen", strings.TrimPrefix(gw.HTTP, "http://"), "--log-level", "info")
	c := gw.Client(t)
	metric := func(prefix string) string {
		r := c.Do(http.MethodGet, "/metrics", nil)
		for _, l := range strings.Split(string(r.Body), "\n") {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		return ""
	}

	conn, err := net.Dial("tcp", strings.TrimPrefix(gw.HTTP, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /messages/abandoned HTTP/1.1\r\nHost: x\r\n\r\n")
	if !testwait.Until(30*time.Second, func() bool { return metric("lmq_long_polls_waiting ") == "lmq_long_polls_waiting 1" }) {
		t.Fatalf("the pull never waited: %q", metric("lmq_long_polls_waiting "))
	}
	conn.Close()

	if !testwait.Until(30*time.Second, func() bool {
		return strings.Contains(gw.Output(), `path=/messages/abandoned query="" status=499 bytes=0`)
	}) {
		t.Fatalf("no 499 access log line for the abandoned pull in:\n%s", gw.Output())
	}
	if strings.Contains(gw.Output(), `path=/messages/abandoned query="" status=200`) {
		t.Errorf("the abandoned pull was logged as a 200:\n%s", gw.Output())
	}
	if l := metric(`lmq_http_request_duration_seconds_count{code="499",method="GET",route="/messages/{name}"}`); !strings.HasSuffix(l, " 1") {
		t.Errorf("499 requests: %q, want 1", l)
	}
	if l := metric(`lmq_http_request_duration_seconds_count{code="200",method="GET",route="/messages/{name}"}`); l != "" {
		t.Errorf("an abandoned pull counted as a 200 pull: %q", l)
	}
	if l := metric(`lmq_pulls_total{queue="abandoned"}`); l != "" && !strings.HasSuffix(l, " 0") {
		t.Errorf("an abandoned pull counted as a pull: %q", l)
	}

	// The queue is not stuck: a message pushed now goes to the next pull.
	if r := c.Do(http.MethodPost, "/messages/abandoned", []byte("next")); r.Status != http.StatusOK {
		t.Fatalf("push: %v", r)
	}
	conn2, err := net.Dial("tcp", strings.TrimPrefix(gw.HTTP, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	fmt.Fprintf(conn2, "GET /messages/abandoned?t=5 HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn2), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("pull after the abandoned one: %d", resp.StatusCode)
	}
}
