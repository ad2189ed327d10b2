package e2e

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
)

// Cross-site requests, message bodies as pages and absolute-form targets
// (issue 25, findings 4, 5 and 7).

// crossSiteOrigin is the extra origin the gateway of TestCrossSiteRequests
// trusts (--allowed-origins).
const crossSiteOrigin = "https://console.example"

// crossSiteGateway starts a gateway with basic authentication and tokens,
// which a browser remembers and sends with any request to the gateway, also
// one that a page of another site makes it send.
func crossSiteGateway(t *testing.T) *Gateway {
	t.Helper()
	g := newOpsGateway(t)
	g.opsLaunch(nil, "--http-listen", strings.TrimPrefix(g.HTTP, "http://"),
		"--auth-basic", "admin:pw", "--tokens", "--allowed-origins", "HTTPS://Console.Example:443/")
	return g
}

// basicAdmin is the operator's credential of crossSiteGateway.
var basicAdmin = []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:pw"))}

// withAdmin is hdr after the operator's credential.
func withAdmin(hdr ...string) []string { return append(append([]string{}, basicAdmin...), hdr...) }

// tokenNames lists the names of the gateway's tokens.
func tokenNames(t *testing.T, c *Client) []string {
	t.Helper()
	var l struct {
		Tokens []struct {
			Name string `json:"name"`
		} `json:"tokens"`
	}
	r := c.Expect(http.StatusOK, http.MethodGet, "/tokens", nil, basicAdmin...)
	if err := json.Unmarshal(r.Body, &l); err != nil {
		t.Fatalf("GET /tokens: %v: %v", r, err)
	}
	var names []string
	for _, tok := range l.Tokens {
		names = append(names, tok.Name)
	}
	return names
}

// TestCrossSiteRequests: a state-changing request that a page of another
// site made a browser send, with the browser's saved basic credentials, is
// refused (403) and changes nothing; without Origin and Sec-Fetch-Site (curl,
// LMQ clients), from the gateway's own origin or from an allowed origin the
// same requests work; POST /tokens and the console's POST /ui/api/match
// want application/json.
func TestCrossSiteRequests(t *testing.T) {
	t.Parallel()
	g := crossSiteGateway(t)
	c := g.Client(t)
	const evil = "http://evil.example"

	// Two queues; "csrf.dead" holds a dead letter.
	c.Expect(http.StatusNoContent, http.MethodGet, "/messages/csrf.a?t=0", nil, basicAdmin...)
	c.Expect(http.StatusNoContent, http.MethodPatch, "/properties/csrf.dead", []byte(`{"retry":0,"dead_letter":true}`),
		withAdmin("Content-Type", "application/json")...)
	c.Expect(http.StatusOK, http.MethodPost, "/messages/csrf.dead", []byte("died"), basicAdmin...)
	m := c.Expect(http.StatusOK, http.MethodGet, "/messages/csrf.dead?t="+msgWait, nil, basicAdmin...)
	c.Expect(http.StatusNoContent, http.MethodPost, "/messages/csrf.dead/"+m.ID()+"?reply=nack", nil, basicAdmin...)
	testwait.For(t, "a dead letter in csrf.dead", func() bool {
		return string(c.Expect(http.StatusOK, http.MethodGet, "/queues/csrf.dead/dead", nil, basicAdmin...).Body) == `{"size":1}`
	})

	tokenSpec := []byte(`{"name":"csrf","rights":["admin"],"prefix":""}`)
	multipartBody := "--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\nx\r\n--b--\r\n"
	// What a browser sends for a form or fetch of another site: some
	// browsers send Sec-Fetch-Site, older ones only Origin.
	refused := []struct {
		method, path, body string
		hdr                []string
	}{
		{"POST", "/tokens", string(tokenSpec), []string{"Origin", evil, "Sec-Fetch-Site", "cross-site", "Content-Type", "text/plain"}},
		{"POST", "/tokens", string(tokenSpec), []string{"Origin", evil, "Content-Type", "application/json"}},
		{"POST", "/messages?qre=.*", "x", []string{"Origin", evil, "Content-Type", "text/plain"}},
		{"POST", "/messages/csrf.a", "x=1", []string{"Origin", evil, "Content-Type", "application/x-www-form-urlencoded"}},
		{"POST", "/messages/csrf.a", "x", []string{"Origin", evil, "Sec-Fetch-Site", "cross-site", "Content-Type", "text/plain"}},
		{"POST", "/messages/csrf.a", multipartBody, []string{"Sec-Fetch-Site", "cross-site", "Content-Type", "multipart/form-data; boundary=b"}},
		{"POST", "/msgs/csrf.a", "x", []string{"Origin", "null", "Content-Type", "text/plain"}},
		// same-site is not same-origin: another host of the same site.
		{"POST", "/messages/csrf.a", "x", []string{"Origin", "http://other.127.0.0.1.nip.io", "Sec-Fetch-Site", "same-site"}},
		{"POST", "/queues/csrf.dead/dead/respawn", "", []string{"Origin", evil, "Sec-Fetch-Site", "cross-site"}},
		{"DELETE", "/queues/csrf.dead/dead", "", []string{"Origin", evil}},
		{"DELETE", "/queues/csrf.a", "", []string{"Sec-Fetch-Site", "cross-site"}},
		{"PUT", "/properties", `[]`, []string{"Origin", evil, "Content-Type", "application/json"}},
		{"PATCH", "/properties/csrf.a", `{"timeout":7}`, []string{"Origin", evil, "Content-Type", "application/json"}},
		{"POST", "/ui/api/match", `{"name":"a","list":[]}`, []string{"Origin", evil, "Content-Type", "text/plain"}},
	}
	for _, rq := range refused {
		r := c.Expect(http.StatusForbidden, rq.method, rq.path, []byte(rq.body), withAdmin(rq.hdr...)...)
		var e struct{ Error string }
		if err := json.Unmarshal(r.Body, &e); err != nil || !strings.Contains(e.Error, "cross-origin request refused") {
			t.Errorf("%s %s %v: 403 %q, want a JSON error saying cross-origin request refused", rq.method, rq.path, rq.hdr, r.Body)
		}
	}
	// Nothing happened.
	if names := tokenNames(t, c); len(names) != 0 {
		t.Errorf("tokens after refused requests: %v", names)
	}
	c.Expect(http.StatusNoContent, http.MethodGet, "/messages/csrf.a?t=0", nil, basicAdmin...)
	c.Expect(http.StatusNoContent, http.MethodGet, "/messages/csrf.dead?t=0", nil, basicAdmin...)
	ExpectJSON(t, c.Expect(http.StatusOK, http.MethodGet, "/queues/csrf.dead/dead", nil, basicAdmin...), `{"size":1}`)
	if p := string(c.Expect(http.StatusOK, http.MethodGet, "/properties/csrf.a", nil, basicAdmin...).Body); strings.Contains(p, `"timeout":7`) {
		t.Errorf("properties after a refused PATCH: %s", p)
	}
	// Reading is not refused (a page of another site cannot read the answer).
	c.Expect(http.StatusOK, http.MethodGet, "/queues/csrf.dead/dead", nil, withAdmin("Origin", evil, "Sec-Fetch-Site", "cross-site")...)

	// POST /tokens and the console's JSON endpoint want application/json
	// (what a form cannot send), also without any browser header.
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=b"} {
		hdr := basicAdmin
		if ct != "" {
			hdr = withAdmin("Content-Type", ct)
		}
		r := c.Expect(http.StatusUnsupportedMediaType, http.MethodPost, "/tokens", tokenSpec, hdr...)
		ExpectJSON(t, r, `{"error":"content-type must be application/json"}`)
		c.Expect(http.StatusUnsupportedMediaType, http.MethodPost, "/ui/api/match", []byte(`{"name":"a","list":[]}`), hdr...)
	}
	if names := tokenNames(t, c); len(names) != 0 {
		t.Errorf("tokens after POSTs without application/json: %v", names)
	}

	// The same requests as curl, an LMQ client or an SDK send them (no
	// Origin, no Sec-Fetch-Site) work as before.
	ctJSON := []string{"Content-Type", "application/json"}
	c.Expect(http.StatusCreated, http.MethodPost, "/tokens", tokenSpec, withAdmin(ctJSON...)...)
	c.Expect(http.StatusOK, http.MethodPost, "/messages?qre=%5Ecsrf%5C.a%24", []byte("all"), withAdmin("Content-Type", "text/plain")...)
	c.Expect(http.StatusOK, http.MethodPost, "/messages/csrf.a", []byte("x=1"), withAdmin("Content-Type", "application/x-www-form-urlencoded")...)
	ExpectJSON(t, c.Expect(http.StatusOK, http.MethodPost, "/queues/csrf.dead/dead/respawn", nil, basicAdmin...), `{"respawned":1}`)
	c.Expect(http.StatusOK, http.MethodPost, "/ui/api/match", []byte(`{"name":"a","list":[]}`), withAdmin(ctJSON...)...)
	for _, body := range []string{"all", "x=1"} {
		if r := c.Expect(http.StatusOK, http.MethodGet, "/messages/csrf.a?t="+msgWait, nil, basicAdmin...); string(r.Body) != body {
			t.Fatalf("pull: %v, want %q", r, body)
		}
	}
	if r := c.Expect(http.StatusOK, http.MethodGet, "/messages/csrf.dead?t="+msgWait, nil, basicAdmin...); string(r.Body) != "died" {
		t.Fatalf("respawned: %v", r)
	}

	// From the gateway's own origin (the console's page), and from the
	// allowed origin, spelled as a browser sends it.
	for i, hdr := range [][]string{
		{"Origin", g.HTTP},
		{"Origin", g.HTTP, "Sec-Fetch-Site", "same-origin"},
		{"Sec-Fetch-Site", "same-origin"},
		{"Sec-Fetch-Site", "none"}, // typed into the address bar, a bookmark
		{"Origin", crossSiteOrigin, "Sec-Fetch-Site", "cross-site"},
		{"Origin", crossSiteOrigin},
	} {
		body := "ok" + strconv.Itoa(i)
		c.Expect(http.StatusOK, http.MethodPost, "/messages/csrf.a", []byte(body), withAdmin(append(hdr, "Content-Type", "text/plain")...)...)
		if r := c.Expect(http.StatusOK, http.MethodGet, "/messages/csrf.a?t="+msgWait, nil, basicAdmin...); string(r.Body) != body {
			t.Fatalf("pull after push with %v: %v", hdr, r)
		}
		c.Expect(http.StatusCreated, http.MethodPost, "/tokens", []byte(`{"name":"t`+strconv.Itoa(i)+`","rights":["push"]}`),
			withAdmin(append(hdr, ctJSON...)...)...)
	}
	c.Expect(http.StatusNoContent, http.MethodPatch, "/properties/csrf.a", []byte(`{"timeout":7}`),
		withAdmin("Origin", g.HTTP, "Sec-Fetch-Site", "same-origin", "Content-Type", "application/json")...)
	if names := tokenNames(t, c); len(names) != 7 {
		t.Errorf("tokens: %v, want csrf and t0…t5", names)
	}
}

// TestCrossSiteBodyHeaders: an answer whose body is a message's bytes (a
// pull, a pull of any queue, a dead letter) tells a browser not to render it
// as a page of the gateway's origin: nosniff and a sandbox CSP.
func TestCrossSiteBodyHeaders(t *testing.T) {
	t.Parallel()
	_, c := StartClient(t)
	const page = `<html><script>alert(document.domain)</script></html>`
	check := func(what string, r *Response) {
		t.Helper()
		if string(r.Body) != page || r.Header.Get("Content-Type") != "text/html" {
			t.Fatalf("%s: %v", what, r)
		}
		if got := r.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q, want nosniff", what, got)
		}
		if got := r.Header.Get("Content-Security-Policy"); got != "sandbox" {
			t.Errorf("%s: Content-Security-Policy %q, want sandbox", what, got)
		}
	}
	c.PatchProps("html", `{"retry":0,"dead_letter":true}`)
	c.Push("html", []byte(page), "text/html")
	r := c.Expect(http.StatusOK, http.MethodGet, "/messages/html?t="+msgWait, nil)
	check("pull", r)
	c.ExpectReply(http.StatusNoContent, "html", r.ID(), "nack")
	testwait.For(t, "a dead letter in html", func() bool {
		return string(c.Expect(http.StatusOK, http.MethodGet, "/queues/html/dead", nil).Body) == `{"size":1}`
	})
	check("dead letter", c.Expect(http.StatusOK, http.MethodGet, "/queues/html/dead/head", nil))

	c.Push("html", []byte(page), "text/html")
	check("pull any", c.Expect(http.StatusOK, http.MethodGet, "/messages?qre=^html$&t="+msgWait, nil))
	c.Push("html", []byte(page), "text/html")
	check("pull under /msgs", c.Expect(http.StatusOK, http.MethodGet, "/msgs/html?t="+msgWait, nil))

	// The console's preview carries bodies in JSON, which stays JSON.
	p := c.Expect(http.StatusOK, http.MethodGet, "/ui/api/peek?dead=1&name=html", nil)
	if p.Header.Get("X-Content-Type-Options") != "nosniff" || p.Header.Get("Content-Security-Policy") != "sandbox" {
		t.Errorf("console peek: %v", p.Header)
	}
}

// TestRawAbsoluteFormTarget: a request line in absolute form whose path holds
// raw UTF-8 next to an encoded "/" (what go-lmq sends for such a name, with
// URL.Opaque) names the queue of the encoded path, as its origin form does
// and as LMQ served it, not the reply route of the name's first part.
func TestRawAbsoluteFormTarget(t *testing.T) {
	t.Parallel()
	g, c := StartClient(t)
	host := strings.TrimPrefix(g.HTTP, "http://")
	send := func(method, target, body string) (int, string, http.Header) {
		t.Helper()
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		req := method + " " + target + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n"
		if method == http.MethodPost {
			req += "Content-Type: text/plain\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n"
		}
		if _, err := io.WriteString(conn, req+"\r\n"+body); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	for i, name := range []string{"extra%2Fünï", "extra%2Fplain", "日本%2F語"} {
		queue := strings.ReplaceAll(name, "%2F", "/")
		body := "abs" + strconv.Itoa(i)
		if st, b, _ := send(http.MethodPost, g.HTTP+"/messages/"+name, body); st != http.StatusOK || b != `{"accum":"no"}` {
			t.Fatalf("absolute-form push to %s: %d %s", name, st, b)
		}
		c.MustPull(queue, msgWait, body)

		// And back: pushed by name, pulled in absolute form with raw bytes.
		c.Push(queue, []byte(body), "text/plain")
		st, b, h := send(http.MethodGet, g.HTTP+"/messages/"+name+"?t="+msgWait, "")
		if st != http.StatusOK || b != body || h.Get(hQueue) != queue {
			t.Fatalf("absolute-form pull from %s: %d %q %v", name, st, b, h)
		}
	}
	// The queue "extra" got none of them.
	c.PullEmpty("extra", "0")
}
