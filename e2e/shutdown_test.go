package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// TestShutdownRelayedAckDuringDrain: gateway A delivers a message and is
// sent SIGTERM while a push to it is still in flight, which holds A's drain
// up. During the drain the client acks the delivery through gateway B: B
// relays the ack to A, which still holds the delivery and applies it, so B
// answers 204; the push in flight completes; A exits cleanly; and the
// message is gone for good: its stream is empty and a pull through B waits
// past the queue's timeout and JetStream's redelivery backstop and gets 204.
//
// (The order this checks: answering waiting pulls and draining the front
// ends come before the core closes its subscription for relayed replies and
// before the unanswered deliveries are released.)
func TestShutdownRelayedAckDuringDrain(t *testing.T) {
	heavy(t, "two gateways and a drain that waits out a slow push")
	t.Parallel()
	url := StartNATS(t)
	// A's slow push must not be cut by the body timeouts: the drain is
	// meant to wait for it.
	a := StartWithNATS(t, url, "--shutdown-timeout", "120s", "--read-body-idle-timeout", "0", "--min-body-rate", "0")
	b := StartWithNATS(t, url)
	ca, cb := a.Client(t), b.Client(t)
	const q, slowQ = "shutdown-relay", "shutdown-relay-slow"
	// Longer than this test needs between the pull and the ack, even on a
	// loaded machine; the backstop (JetStream's AckWait) is 15 s.
	ca.PatchProps(q, `{"timeout":10}`)
	ca.Push(q, []byte("m1"), "text/plain")
	m := ca.MustPull(q, msgWait, "m1")

	// A push whose body stops half-way keeps a request in flight on A. With
	// "Expect: 100-continue" the server says when the handler started
	// reading the body: from then on, A's drain waits for it.
	addrA := strings.TrimPrefix(a.HTTP, "http://")
	conn, err := net.Dial("tcp", addrA)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const body = "slow push body"
	if _, err := fmt.Fprintf(conn, "POST /messages/%s HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n",
		Q(slowQ), len(body)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	req, _ := http.NewRequest(http.MethodPost, "/messages/"+Q(slowQ), nil)
	_ = conn.SetReadDeadline(time.Now().Add(requestTimeout))
	if cont, err := http.ReadResponse(br, req); err != nil || cont.StatusCode != http.StatusContinue {
		t.Fatalf("slow push: %v %v, want 100 Continue", cont, err)
	}

	p := a.proc
	fmt.Fprintf(a.out, "--- SIGTERM %s\n", time.Now().Format(time.RFC3339Nano))
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// A stops accepting first: once its listener refuses connections, A is
	// draining.
	if !testwait.Until(stopTimeout, func() bool {
		c, err := net.DialTimeout("tcp", addrA, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	}) {
		t.Fatal("A still accepts connections after SIGTERM")
	}
	select {
	case <-p.exited:
		t.Fatalf("A exited (%v) with a request in flight", p.err)
	default:
	}

	// The ack, through B, relayed to A during its drain.
	cb.ExpectReply(http.StatusNoContent, q, m.ID(), "ack")
	select {
	case <-p.exited:
		t.Fatalf("A exited (%v) before the slow push ended: the ack was not sent during the drain", p.err)
	default:
	}

	// The push in flight completes, and A then exits cleanly.
	if _, err := conn.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatalf("slow push during the drain: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("slow push during the drain: %d, want 200", resp.StatusCode)
	}
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Fatalf("A did not exit within %v of its last request", stopTimeout)
	}
	a.proc = nil
	if p.err != nil {
		t.Errorf("A exited with %v after SIGTERM", p.err)
	}

	// Acked means gone: nothing of q is left in JetStream, and no
	// redelivery comes, neither a release by A nor JetStream's backstop
	// after the timeout (10 s + 5 s).
	js := JetStreamOf(t, url)
	if !testwait.Until(10*time.Second, func() bool { return QueueStream(t, js, q).State.Msgs == 0 }) {
		t.Errorf("after the relayed ack, q's stream still holds %d messages", QueueStream(t, js, q).State.Msgs)
	}
	cb.PullEmpty(q, "20")
	cb.MustPull(slowQ, msgWait, body)
}
