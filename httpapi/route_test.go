package httpapi

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"
)

// mayMatch never refuses a path the route's own expression accepts, so the
// pre-check changes no routing decision.
func TestMayMatchIsNecessary(t *testing.T) {
	t.Parallel()
	templates := []string{
		"/messages", "/messages/{name}", "/messages/{name}/{id}", "/msgs/{name}/{id}",
		"/queues", "/queues/{name}", "/queues/{name}/dead", "/queues/{name}/dead/head",
		"/queues/{name}/dead/respawn", "/properties", "/props/{name}",
	}
	paths := []string{
		"/", "", "/messages", "/messages/", "/messages/q", "/messages/q/", "/messages/q/id",
		"/messages/q/id/more", "/messages//", "/messages//x", "/messagesq", "/msgs/q/id",
		"/messages/lmq%2Ffoo", "/messages/lmq%2Ffoo/id", "/messages/%E3%81%82/x",
		"/messages/a%2Fb%2Fc", "/m%65ssages/q", "/queues/q/dead", "/queues/q%2Fdead/head",
		"/queues/q/dead/head", "/queues/q/dead/respawn", "/queues/x/dead/other", "/props/x",
		"/properties", "/properties/", "/messages/sp%20ace", "/messages/%252F", "/messages/ü/x",
		"/messages/a+b", "/messages/..", "/messages/../queues",
	}
	for _, tpl := range templates {
		plain := mux.NewRouter().UseEncodedPath().SkipClean(true).Path(tpl)
		pre := mayMatch(tpl)
		for _, p := range paths {
			u, err := url.ParseRequestURI(p)
			if p == "" {
				u, err = &url.URL{}, nil
			}
			if err != nil {
				t.Fatalf("%q: %v", p, err)
			}
			// Through rawPath too, as the handler sees the request.
			for _, uu := range []*url.URL{u, withRawPath(u, p)} {
				r := &http.Request{Method: http.MethodGet, URL: uu}
				var m mux.RouteMatch
				if plain.Match(r, &m) && !pre(r, &m) {
					t.Errorf("template %s: mayMatch refuses %q (RawPath %q), which the route matches", tpl, uu.Path, uu.RawPath)
				}
			}
		}
	}
}

// withRawPath is u as rawPath leaves it for a request URI of path p.
func withRawPath(u *url.URL, p string) *url.URL {
	enc := escapeNonASCII(p)
	if dec, err := url.PathUnescape(enc); err != nil || dec != u.Path {
		return u
	}
	v := *u
	v.RawPath = enc
	return &v
}

// A client that reads nothing does not hold its answer's handler: the write
// fails at the write timeout and the delivery is given back. (The deadline
// is set by the body's Write, not by WriteHeader.)
func TestWriteTimeoutOnDelivery(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{Timeouts: Timeouts{Write: 300 * time.Millisecond}})
	// More than the socket buffers hold: the client's receive buffer is
	// fixed small below, the server's send buffer grows to tcp_wmem's
	// maximum (4 MiB by default).
	big := strings.Repeat("z", 16<<20)
	s.do("POST", "/messages/big", big).want(t, "push", 200, `{"accum":"no"}`)

	conn, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("GET /messages/big?t=0 HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	// Reads nothing; the bound below is reached only on failure.
	deadline := time.Now().Add(20 * time.Second)
	for len(s.core.abandonedIDs()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("delivery to a client that reads nothing was not given back")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
