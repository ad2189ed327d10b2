package httpapi

import (
	"net"
	"net/http"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/fakecore"
)

// TestConnBoundRefused: the pull header is checked before the pull; a
// server without a ConnBound (or a core that cannot bind) refuses it.
func TestConnBoundRefused(t *testing.T) {
	s := startAPI(t, Options{})
	for _, tc := range []struct {
		hdr  []string
		want int
	}{
		{[]string{HeaderReleaseOnDisconnect, "1"}, http.StatusBadRequest}, // no ConnBound here
		{[]string{HeaderReleaseOnDisconnect, "maybe"}, http.StatusBadRequest},
		{[]string{HeaderReleaseOnDisconnect, "0"}, http.StatusNoContent},
		{[]string{HeaderReleaseOnDisconnect, "false"}, http.StatusNoContent},
		{nil, http.StatusNoContent},
	} {
		if a := s.do("GET", "/messages/q?t=0", "", tc.hdr...); a.status != tc.want {
			t.Errorf("%v: %d, want %d", tc.hdr, a.status, tc.want)
		}
	}
	if NewConnBound(coreOf(fakecore.New()), nil) != nil {
		t.Error("a core that cannot bind deliveries got a ConnBound")
	}
}

// BenchmarkConnStateClose is what the tracking adds to closing a connection
// that never pulled with the header.
func BenchmarkConnStateClose(b *testing.B) {
	cb := &ConnBound{conns: make(map[net.Conn]*gateway.Bound)}
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	b.ReportAllocs()
	for b.Loop() {
		cb.ConnState(c1, http.StateActive)
		cb.ConnState(c1, http.StateIdle)
		cb.ConnState(c1, http.StateClosed)
	}
}
