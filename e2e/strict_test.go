package e2e

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// Issue 15, items 5, 7 and 8, from outside: malformed query strings are 400
// instead of being dropped; headers too large to store are 431 instead of
// 503; durations beyond 10 years are 400 (RPC: an error) instead of
// overflowing past the year 2262. Ordinary values keep working.
func TestStrictInput(t *testing.T) {
	t.Parallel()
	g := Start(t)

	// expect400 sends a request that must be refused with a JSON error
	// naming what is wrong (every one of the words).
	expect400 := func(t *testing.T, c *Client, method, path string, body []byte, words []string, hdr ...string) {
		t.Helper()
		r := c.Expect(http.StatusBadRequest, method, path, body, hdr...)
		expectJSONType(t, r)
		for _, w := range words {
			if !strings.Contains(string(r.Body), w) {
				t.Errorf("%s %.80s: error %s does not name %q", method, path, r.Body, w)
			}
		}
	}

	t.Run("malformed query", func(t *testing.T) {
		c := g.Client(t)
		const q = "/messages/strict-query"
		// Each of these pulled with no t at all, waiting forever.
		expect400(t, c, http.MethodGet, q+"?t=%zz", nil, []string{"query", "%zz"})
		expect400(t, c, http.MethodGet, q+"?t=0;x=1", nil, []string{"query", "semicolon"})
		expect400(t, c, http.MethodGet, q+"?"+strings.Repeat("a&", 10000)+"t=0", nil, []string{"query", "parameters"})
		expect400(t, c, http.MethodGet, "/messages?qre=strict&t=%zz", nil, []string{"query"})
		// Answered 200 before and stored without its delay, deliverable at once.
		expect400(t, c, http.MethodPost, q+"?delay=3600;x=1", []byte("early"), []string{"semicolon"})
		expect400(t, c, http.MethodPost, q+"?ttl=%G0", []byte("x"), []string{"query"})
		expect400(t, c, http.MethodPost, q+"/some-id?reply=ack;x", nil, []string{"query"})
		expect400(t, c, http.MethodPatch, "/properties/strict-query?%", []byte(`{"retry":1}`), []string{"query"},
			"Content-Type", "application/json")
		// The routes package ops mounts are covered too.
		expect400(t, c, http.MethodGet, "/stats?x=%zz", nil, []string{"query"})
		expect400(t, c, http.MethodGet, "/metrics?a;b", nil, []string{"query"})
		expect400(t, c, http.MethodGet, "/queues?x=%", nil, []string{"query"})

		// Nothing was stored by the refused push, and the properties did not change.
		c.PullEmpty("strict-query", "0")
		ExpectJSON(t, c.Expect(http.StatusOK, http.MethodGet, "/properties/strict-query", nil), `{"accum":0,"retry":2,"timeout":30}`)

		// Well-formed queries work as before, unknown parameters included
		// (LMQ clients send extras), up to Go's limit of 10,000 parameters.
		c.PushPath(q+"?client=x&v=1", []byte("one"), "text/plain")
		c.MustPull("strict-query", "0&unknown=1&x=%20", "one")
		c.Expect(http.StatusNoContent, http.MethodGet, q+"?"+strings.Repeat("a&", 9999)+"t=0", nil)
		c.Expect(http.StatusOK, http.MethodGet, "/stats?format=whatever", nil)
	})

	t.Run("durations", func(t *testing.T) {
		c := g.Client(t)
		const name = "strict-durations"
		q := "/messages/" + name
		const rng = "315360000"
		// ttl=9000000000 stored a message never deliverable; delay=9000000000
		// delivered at once.
		for _, tc := range []struct{ query, param string }{
			{"ttl=9000000000", "ttl"},
			{"ttl=1e10", "ttl"},
			{"delay=9000000000", "delay"},
			{"delay=315360000.5", "delay"},
			{"delay=-1", "delay"},
			{"ttl=NaN", "ttl"},
			{"delay=Inf", "delay"},
		} {
			expect400(t, c, http.MethodPost, q+"?"+tc.query, []byte("x"), []string{tc.param, rng})
		}
		for _, tq := range []string{"9000000000", "1e10", "315360000.001", "Inf", "-1", "NaN"} {
			expect400(t, c, http.MethodGet, q+"?t="+tq, nil, []string{"t must be", rng})
		}
		// accum 8e9 and 1e10 made a compound pullable at once; ttl 1e10
		// stored messages never deliverable.
		for _, js := range []string{`{"accum":8e9}`, `{"accum":1e10}`, `{"pack":1e10}`, `{"ttl":1e10}`, `{"timeout":1e10}`, `{"ttl":-1}`} {
			key := strings.Trim(strings.SplitN(js, ":", 2)[0], `{"`)
			expect400(t, c, http.MethodPatch, "/properties/"+name, []byte(js), []string{key},
				"Content-Type", "application/json")
		}
		expect400(t, c, http.MethodPut, "/properties", []byte(`[["^strict-",{"ttl":9000000000}]]`), []string{"ttl", rng},
			"Content-Type", "application/json")
		ExpectJSON(t, c.Expect(http.StatusOK, http.MethodGet, "/properties", nil), `[]`)
		ExpectJSON(t, c.Expect(http.StatusOK, http.MethodGet, "/properties/"+name, nil), `{"accum":0,"retry":2,"timeout":30}`)
		c.PullEmpty(name, "0")

		// The largest values are taken and mean what they say.
		c.PushPath(q+"?ttl=315360000", []byte("lives long"), "text/plain")
		c.MustPull(name, "315360000", "lives long")
		c.PushPath(q+"?delay=315360000", []byte("much later"), "text/plain")
		c.PullEmpty(name, "0")

		c.PatchProps("strict-ttl", `{"ttl":315360000,"timeout":315360000}`)
		c.Push("strict-ttl", []byte("kept"), "text/plain")
		c.MustPull("strict-ttl", "0", "kept")

		c.PatchProps("strict-accum", `{"accum":315360000}`)
		ExpectJSON(t, c.Expect(http.StatusOK, http.MethodPost, "/messages/strict-accum", []byte("part")), `{"accum":"new"}`)
		c.PullEmpty("strict-accum", "0") // the window is open for 10 years
		ExpectJSON(t, c.Expect(http.StatusOK, http.MethodGet, "/properties/strict-accum", nil),
			`{"accum":315360000,"retry":2,"timeout":30}`)
	})

	t.Run("headers", func(t *testing.T) {
		c := g.Client(t)
		const name = "strict-headers"
		q := "/messages/" + name
		// A 64 KiB content-type answered 503, inviting retries forever.
		for _, size := range []int{64 << 10, 4<<10 + 1} {
			ct := "text/" + strings.Repeat("a", size-len("text/"))
			r := c.Expect(http.StatusRequestHeaderFieldsTooLarge, http.MethodPost, q, []byte("x"), "Content-Type", ct)
			expectJSONType(t, r)
			if !strings.Contains(string(r.Body), "content-type") {
				t.Errorf("431 for %d bytes: %s does not name the header", size, r.Body)
			}
		}
		// Beyond --max-header-bytes net/http answers 431 itself.
		c.Expect(http.StatusRequestHeaderFieldsTooLarge, http.MethodPost, q, []byte("x"),
			"X-Padding", strings.Repeat("p", 128<<10))

		// A header a preserve hook keeps is stored too.
		c.PatchProps(name, `{"hooks":{"pre_http_push":[["lmq_hook_preserve_header",["x-a","x-b"]]]}}`)
		c.Expect(http.StatusRequestHeaderFieldsTooLarge, http.MethodPost, q, []byte("x"), "X-A", strings.Repeat("a", 5000))
		c.Expect(http.StatusRequestHeaderFieldsTooLarge, http.MethodPost, q, []byte("x"),
			"X-A", strings.Repeat("a", 3500), "X-B", strings.Repeat("b", 3500))
		// Headers no hook keeps are not stored, so only --max-header-bytes applies.
		c.PushPath(q, []byte("unkept"), "text/plain", "X-Other", strings.Repeat("o", 20<<10))
		c.MustPull(name, "0", "unkept")
		c.PullEmpty(name, "0")

		// At the limit: stored and given back as sent; the server still serves.
		ct := "text/" + strings.Repeat("c", 4<<10-len("text/"))
		c.PushPath(q, []byte("edge"), ct, "X-A", strings.Repeat("a", 1000))
		r := c.MustPull(name, "0", "edge")
		if r.Header.Get("Content-Type") != ct || r.Header.Get("X-A") != strings.Repeat("a", 1000) {
			t.Errorf("content-type of %d bytes, x-a of %d bytes given back", len(r.Header.Get("Content-Type")), len(r.Header.Get("X-A")))
		}
		c.ExpectReply(http.StatusNoContent, name, r.ID(), "ack")
	})

	t.Run("rpc", func(t *testing.T) {
		rc := dialRPC(t, g.RPCAddr)
		const name = "strict-rpc"
		for _, tc := range []struct {
			method string
			params []any
			words  []string
		}{
			{"pull", []any{name, 1e10}, []string{"badarg", "timeout", "315360000"}},
			{"pull_any", []any{"^strict-rpc$", 9e9}, []string{"badarg", "timeout"}},
			{"push", []any{name, "x", map[string]any{"delay": 9e9}}, []string{"badarg", "delay", "315360000"}},
			{"push", []any{name, "x", map[string]any{"ttl": 1e10}}, []string{"badarg", "ttl"}},
			{"update_props", []any{name, map[string]any{"accum": 8e9}}, []string{"invalid_props", "accum", "315360000"}},
			{"update_props", []any{name, map[string]any{"ttl": 1e10}}, []string{"invalid_props", "ttl"}},
			{"set_default_props", []any{[]any{[]any{".*", map[string]any{"pack": 1e10}}}}, []string{"invalid_props", "pack"}},
		} {
			e := rc.MustFail(tc.method, tc.params...)
			for _, w := range tc.words {
				if !strings.Contains(e, w) {
					t.Errorf("rpc %s: error %q does not name %q", tc.method, e, w)
				}
			}
		}
		rc.MustEmpty("pull", name, 0)
		rc.MustOK("push", name, "fine", map[string]any{"ttl": 315360000})
		if m := rc.MustPull("pull", name, 315360000); m.Content != "fine" {
			t.Fatalf("rpc pull: %+v", m)
		}
	})
}

// A full store is a 503 that may succeed later (once space is freed), so it
// says when to try again; with --nats-url the store's limit is JetStream's.
func TestStrictRetryAfterStoreFull(t *testing.T) {
	t.Parallel()
	servers, _ := StartNATSCluster(t, 1, func(_ int, o *server.Options) {
		o.Cluster = server.ClusterOpts{}
		o.Routes = nil
		o.JetStreamMaxStore = 4 << 20
	})
	g := StartWithNATS(t, ClientURLs(servers))
	c := g.Client(t)
	body := bytes.Repeat([]byte("f"), 256<<10)
	var r *Response
	for range 64 {
		if r = c.Do(http.MethodPost, "/messages/strict-full", body); r.Status != http.StatusOK {
			break
		}
	}
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("pushing 16 MiB into a 4 MiB store: last answer %v, want 503", r)
	}
	if got := r.Header.Get("Retry-After"); got != "1" {
		t.Errorf("503 %s: Retry-After %q, want 1", r.Body, got)
	}
	if !strings.Contains(string(r.Body), "insufficient") {
		t.Errorf("503 %s does not say the store is out of resources", r.Body)
	}
	// The queue still serves what it holds. (A pull that does not wait may
	// find the consumer busy for a moment on a loaded machine: let it wait.)
	if p := c.Pull("strict-full", "10"); p.Status != http.StatusOK || !bytes.Equal(p.Body, body) {
		t.Fatalf("pull after the store filled: %d, %d bytes", p.Status, len(p.Body))
	}
}
