package e2e

// The hostile-input test of issue 15: one gateway receives several hundred
// generated malformed HTTP requests and several hundred malformed
// MessagePack-RPC frames, and must come out of it alive, within a memory
// bound, having answered every HTTP request with a well-formed response below
// 500, and still doing a push/pull/ack round trip over both protocols.
//
// Everything is sent as raw bytes over plain TCP, so that the test controls
// exactly what arrives (Go's HTTP client refuses to send most of it). The
// generation is deterministic: a seeded math/rand/v2 source picks among
// hand-written hostile fragments, so a failure names a case that the next run
// sends again.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Bounds of the hostile test.
const (
	// hostileRSSBound is the most resident memory the gateway may use at any
	// moment of the test. An idle gateway with its embedded NATS server
	// resides in about 35 MiB, and no request or frame of the test is bigger
	// than 3 MiB, so the bound leaves JetStream and the garbage collector
	// room while a decoder whose memory follows a declared length cannot
	// hide under it (a count of 10⁷ cost 240 MiB before issue 15).
	hostileRSSBound = 128 << 20
	// hostileAnswerWait bounds the wait for one answer. A correct gateway
	// answers every case at once; the bound only turns a request that would
	// wait forever (a malformed t silently dropped, say) into a failure
	// instead of a hung test.
	hostileAnswerWait = 15 * time.Second
	// hostileWorkers is how many cases are in flight at once, so that the
	// cases that wait for hostileAnswerWait (on a gateway without the fixes)
	// overlap.
	hostileWorkers = 8
	// hostileSeed fixes the generated cases.
	hostileSeed = 15
)

// Queues the hostile cases use. The round trip at the end uses other names,
// which no default-property regexp of the cases matches.
const (
	hqEmpty = "hostile/empty" // pulled from, never pushed to on purpose
	hqPush  = "hostile/push"
	hqProps = "hostile/props"
	hqBatch = "hostile/batch"
	hqRPC   = "hostile/rpc"
)

// TestHostileInput is the "Done when" test of issue 15.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("reads the gateway's memory from /proc/<pid>/status (Linux):", err)
	}
	g, c := StartClient(t)
	pid := g.PID()
	exited := g.proc.exited
	rss := startRSSSampler(pid)
	defaults := c.Expect(http.StatusOK, http.MethodGet, "/properties", nil).Body

	httpAddr := strings.TrimPrefix(g.HTTP, "http://")
	rng := rand.New(rand.NewPCG(hostileSeed, 0x15))
	// The decoders of compound bodies come last: should one of their cases
	// kill the process, the families before it have reported already.
	httpCases := hostileHTTPCases(rng)
	var bombs, others []hostileHTTP
	for _, hc := range httpCases {
		if hc.family == "batch-msgpack" {
			bombs = append(bombs, hc)
		} else {
			others = append(others, hc)
		}
	}
	rpcCases := hostileRPCCases(rng)
	t.Logf("hostile input: %d HTTP requests, %d RPC connections", len(httpCases), len(rpcCases))
	if len(httpCases) < 500 || len(rpcCases) < 500 {
		t.Fatalf("generated %d HTTP and %d RPC cases, want at least 500 of each", len(httpCases), len(rpcCases))
	}

	dead := func(phase string) {
		select {
		case <-exited:
			rss.stop()
			t.Fatalf("lmq-gateway exited during the %s (%v); see the failures above for the cases without an answer", phase, g.proc.err)
		default:
		}
	}
	runHostileHTTP(t, httpAddr, others, exited)
	dead("HTTP cases")
	runHostileRPC(t, g.RPCAddr, rpcCases, exited)
	dead("RPC cases")
	runHostileHTTP(t, httpAddr, bombs, exited)
	dead("MessagePack batch bodies")

	// Alive and still serving: the round trips.
	t.Run("round trip after", func(t *testing.T) {
		c := g.Client(t)
		const q = "hostile-after/http"
		c.Push(q, []byte("after"), "text/plain")
		r := c.MustPull(q, msgWait, "after")
		c.ExpectReply(http.StatusNoContent, q, r.ID(), "ack")
		c.PullEmpty(q, "0")

		rc := dialRPC(t, g.RPCAddr)
		const rq = "hostile-after/rpc"
		rc.MustOK("push", rq, "after")
		m := rc.MustPull("pull", rq, 5)
		if m.Content != "after" {
			t.Errorf("rpc pull after the hostile input: content %#v, want \"after\"", m.Content)
		}
		rc.MustOK("done", rq, m.ID)
		rc.MustEmpty("pull", rq, 0)
	})
	// Every case was to be refused: the default properties are unchanged.
	if got := c.Expect(http.StatusOK, http.MethodGet, "/properties", nil).Body; !bytes.Equal(got, defaults) {
		t.Errorf("default properties changed by the hostile input: %s, was %s", got, defaults)
	}

	dead("round trip")
	maxSampled, samples := rss.stop()
	final := rssBytes(t, pid)
	hwm, err := procStatusBytes(pid, "VmHWM")
	if err != nil {
		t.Fatalf("VmHWM: %v", err)
	}
	t.Logf("gateway RSS: largest of %d samples %d MiB, after %d MiB, peak (VmHWM) %d MiB; bound %d MiB",
		samples, maxSampled>>20, final>>20, hwm>>20, hostileRSSBound>>20)
	for what, n := range map[string]int64{"sampled": maxSampled, "final": final, "peak (VmHWM)": hwm} {
		if n > hostileRSSBound {
			t.Errorf("gateway RSS %s %d MiB, bound %d MiB", what, n>>20, hostileRSSBound>>20)
		}
	}
	out := g.Output()
	for _, bad := range []string{"panic:", "fatal error:", "DATA RACE"} {
		if strings.Contains(out, bad) {
			t.Errorf("gateway output contains %q", bad)
		}
	}
}

// ---- memory of a process ----

// procStatusBytes reads a "kB" field of /proc/<pid>/status (VmRSS, VmHWM, …)
// in bytes.
func procStatusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != field {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc/%d/status: %s: unexpected %q", pid, field, v)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, field, err)
		}
		return n << 10, nil
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

// rssBytes is the resident set size of process pid (VmRSS). The test fails
// when it cannot be read; tests that need it are Linux-only.
func rssBytes(t testing.TB, pid int) int64 {
	t.Helper()
	n, err := procStatusBytes(pid, "VmRSS")
	if err != nil {
		t.Fatalf("RSS of process %d: %v", pid, err)
	}
	return n
}

// rssSampler polls a process's VmRSS in the background and keeps the largest
// value (VmHWM, the kernel's own peak, complements it).
type rssSampler struct {
	done    chan struct{}
	wg      sync.WaitGroup
	max     atomic.Int64
	samples atomic.Int64
}

func startRSSSampler(pid int) *rssSampler {
	s := &rssSampler{done: make(chan struct{})}
	s.wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if n, err := procStatusBytes(pid, "VmRSS"); err == nil {
				s.samples.Add(1)
				if n > s.max.Load() {
					s.max.Store(n)
				}
			}
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	})
	return s
}

// stop ends the sampling (idempotent) and returns the largest sample and the
// number of samples.
func (s *rssSampler) stop() (int64, int64) {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.wg.Wait()
	return s.max.Load(), s.samples.Load()
}

// ---- HTTP ----

// hostileHTTP is one raw HTTP request and what the gateway must answer.
type hostileHTTP struct {
	family, name string
	method       string // for reading the answer (HEAD has no body)
	req          []byte
	want         statusWant
	// truncated requests end early; the test half-closes the connection
	// after them, and a close without an answer is a valid reaction.
	truncated bool
}

// statusWant is the acceptable status of an answer.
type statusWant struct {
	desc string
	ok   func(int) bool
}

var (
	wantBelow500 = statusWant{"a status below 500", func(s int) bool { return s < 500 }}
	want4xx      = statusWant{"4xx", func(s int) bool { return s >= 400 && s < 500 }}
	// wantProtocol is for request lines and headers that net/http itself
	// rejects. Two 5xx are right there (RFC 9110/9112) and expected: 501 for
	// a transfer coding the server does not implement, 505 for an HTTP
	// major version other than 1.
	wantProtocol = statusWant{"a status below 500, or net/http's 501 (unknown transfer coding) or 505 (HTTP version)",
		func(s int) bool { return s < 500 || s == 501 || s == 505 }}
)

func wantStatus(codes ...int) statusWant {
	return statusWant{fmt.Sprint(codes), func(s int) bool {
		for _, c := range codes {
			if s == c {
				return true
			}
		}
		return false
	}}
}

// rawRequest builds an HTTP/1.1 request with Connection: close. hdr is a list
// of name, value pairs; a body (or a method that carries one) gets a
// Content-Length.
func rawRequest(method, target string, body []byte, hdr ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: lmq\r\nConnection: close\r\n", method, target)
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	if body != nil || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// httpOutcome is what came back for one case.
type httpOutcome struct {
	status int // 0 without an answer
	body   []byte
	err    error // why there is no complete, well-formed answer
}

// sendRawHTTP writes req on a fresh connection and reads one answer.
func sendRawHTTP(addr string, hc hostileHTTP) httpOutcome {
	conn, err := net.DialTimeout("tcp", addr, hostileAnswerWait)
	if err != nil {
		return httpOutcome{err: fmt.Errorf("dial: %w", err)}
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(hostileAnswerWait))
	// A write error alone is no failure: the server may answer (431) and
	// close before it has read everything.
	_, werr := conn.Write(hc.req)
	if hc.truncated {
		_ = conn.(*net.TCPConn).CloseWrite()
	}
	br := bufio.NewReader(conn)
	for {
		resp, err := http.ReadResponse(br, &http.Request{Method: hc.method})
		if err != nil {
			if werr != nil {
				err = fmt.Errorf("%w (the write failed too: %v)", err, werr)
			}
			return httpOutcome{err: err}
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue // 100 Continue: the answer follows
		}
		if err != nil {
			return httpOutcome{status: resp.StatusCode, body: body, err: fmt.Errorf("reading the body: %w", err)}
		}
		return httpOutcome{status: resp.StatusCode, body: body}
	}
}

// judge returns why an outcome is a failure, or "".
func (hc hostileHTTP) judge(o httpOutcome) string {
	if o.err != nil {
		if hc.truncated && o.status == 0 && !isTimeout(o.err) {
			return "" // the server closed on an incomplete request
		}
		if isTimeout(o.err) {
			return fmt.Sprintf("no answer within %v (a parameter ignored, so that it waits?)", hostileAnswerWait)
		}
		if o.status == 0 {
			return fmt.Sprintf("no well-formed answer (dropped connection): %v", o.err)
		}
		return fmt.Sprintf("status %d, then: %v", o.status, o.err)
	}
	if !hc.want.ok(o.status) {
		return fmt.Sprintf("status %d %.200q, want %s", o.status, o.body, hc.want.desc)
	}
	return ""
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// runHostileHTTP sends the cases, hostileWorkers at a time, and reports every
// failure, grouped by family. It stops early when the process has exited.
func runHostileHTTP(t *testing.T, addr string, cases []hostileHTTP, exited <-chan struct{}) {
	t.Helper()
	outcomes := make([]httpOutcome, len(cases))
	sent := runPool(len(cases), exited, func(i int) { outcomes[i] = sendRawHTTP(addr, cases[i]) })
	reportFamilies(t, "HTTP", sent,
		func(i int) (string, string) { return cases[i].family, cases[i].name },
		func(i int) string { return cases[i].judge(outcomes[i]) })
}

// runPool calls f(0..n-1) on hostileWorkers goroutines; it stops handing out
// work once exited is closed. sent says for which i f ran.
func runPool(n int, exited <-chan struct{}, f func(int)) (sent []bool) {
	sent = make([]bool, n)
	_ = concurrently(n, hostileWorkers, func(_ context.Context, i int) error {
		select {
		case <-exited:
			return errors.New("the gateway exited") // stops the pool
		default:
		}
		f(i)
		sent[i] = true
		return nil
	})
	return sent
}

// reportFamilies judges the cases that were sent (judge answers "" for a
// pass), then logs a line per family, in the order the families first
// appear, and fails the test with up to 15 failures of each.
func reportFamilies(t *testing.T, proto string, sent []bool, label func(i int) (family, name string), judge func(i int) string) {
	t.Helper()
	fails := map[string][]string{}
	total := map[string]int{}
	var order []string
	for i, ok := range sent {
		fam, name := label(i)
		if total[fam] == 0 {
			order = append(order, fam)
		}
		total[fam]++
		if !ok {
			continue
		}
		if why := judge(i); why != "" {
			fails[fam] = append(fails[fam], fmt.Sprintf("%s: %s", name, why))
		}
	}
	for _, fam := range order {
		f := fails[fam]
		t.Logf("%s %-16s %4d cases, %4d failed", proto, fam, total[fam], len(f))
		for i, msg := range f {
			if i == 15 {
				t.Errorf("%s %s: … and %d more", proto, fam, len(f)-15)
				break
			}
			if len(msg) > 400 {
				msg = msg[:400] + "…"
			}
			t.Errorf("%s %s: %s", proto, fam, msg)
		}
	}
}

// hostileHTTPCases generates the HTTP cases, family by family.
func hostileHTTPCases(rng *rand.Rand) []hostileHTTP {
	var cases []hostileHTTP
	add := func(family, name, method string, req []byte, want statusWant) {
		cases = append(cases, hostileHTTP{family: family, name: name, method: method, req: req, want: want})
	}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	empty, push, props := "/messages/"+Q(hqEmpty), "/messages/"+Q(hqPush), "/properties/"+Q(hqProps)
	batch := "/messages/" + Q(hqBatch) + "?batch=1"
	uuid := func() string {
		var b [16]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	}

	// Malformed request lines and header blocks, through net/http's parser.
	methods := []string{"GET", "POST", "get", "G\x00ET", "GE T", "", "\x80\xff", "GET\t", strings.Repeat("G", 300), "PRI", "CONNECT", "ÄÖÜ", "(GET)", "GET;"}
	// A pull without t would wait forever: every target with a queue has one.
	targets := []string{"/", "", "*", "/messages/q?t=0", "messages/q", "//messages", "/messages/q\x00", "/mess ages", "http://[::1",
		"http://x:99999/", "/%", "/\x7f", "/?", "/#frag", "/" + strings.Repeat("a", 8000), "/messages/%ZZ/x", `\..\..\etc`, "/messages/q?t=0\x01"}
	versions := []string{"HTTP/1.1", "HTTP/1.0", "HTTP/1", "HTTP/2.0", "HTTP/3", "HTTP/1.1x", "http/1.1", "HTTP/01.1", "HTTP/1.1 extra",
		"", "HTTP/9.9", "HTTP/-1.1", "HTTP/1.1\x00", "HTTP/1.1\t"}
	headerBlocks := []string{
		"Host: x\r\n", "", "Host: x\r\nHost: y\r\n", "Host: x\r\nFoo\r\n", "Host: x\r\nFo o: x\r\n", "Host: x\r\nX: a\r\n continued\r\n",
		"Host: x\r\nContent-Length: -1\r\n", "Host: x\r\nContent-Length: 1, 2\r\n", "Host: x\r\nContent-Length: 99999999999999999999\r\n",
		"Host: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n", "Host: x\r\nTransfer-Encoding: gzip\r\n",
		"Host: x\r\nTransfer-Encoding: chunked, chunked\r\n",
		"Host: x\r\nX-Nul: a\x00b\r\n", "Host: x\r\n: empty-name\r\n", "Host: \x01\r\n", "Host: x\r\nContent-Length: 0x10\r\n",
		"Host: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "Host: x\r\n\x80\x81: v\r\n",
	}
	for i := range 80 {
		var req string
		req = pick(methods) + " " + pick(targets) + " " + pick(versions)
		if rng.IntN(4) == 0 {
			req = strings.ReplaceAll(req, " ", pick([]string{"  ", "\t", ""}))
		}
		hb := pick(headerBlocks)
		// The block with a chunked body in it carries its own "\r\n\r\n".
		if before, after, ok := strings.Cut(hb, "\r\n\r\n"); ok {
			req += "\r\n" + before + "\r\nConnection: close\r\n\r\n" + after
		} else {
			req += "\r\n" + hb + "Connection: close\r\n\r\n"
		}
		add("request-line", fmt.Sprintf("#%d %.80q", i, req), "GET", []byte(req), wantProtocol)
	}

	// Bytes that are not HTTP at all, ended by an empty line so that an
	// answer is due.
	for i := range 40 {
		b := make([]byte, 1+rng.IntN(200))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		add("raw-bytes", fmt.Sprintf("random #%d %.40q", i, b), "GET", append(b, "\r\n\r\n"...), wantProtocol)
	}
	for i := range 15 {
		words := make([]string, 1+rng.IntN(6))
		for j := range words {
			words[j] = pick([]string{"GET", "HTTP/1.1", "/", "lmq", "Host:", "::", "%%", "\"", "\t", "1.1"})
		}
		add("raw-bytes", fmt.Sprintf("words #%d", i), "GET", []byte(strings.Join(words, " ")+"\r\n\r\n"), wantProtocol)
	}
	add("raw-bytes", "HTTP/2 preface", "GET", []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), wantProtocol)
	add("raw-bytes", "TLS ClientHello", "GET", append([]byte("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03"), "\r\n\r\n"...), wantProtocol)
	add("raw-bytes", "empty line", "GET", []byte("\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), wantProtocol)

	// Requests cut short; the connection is half-closed after them.
	complete := [][]byte{
		rawRequest("POST", push, []byte("a message body"), "Content-Type", "text/plain"),
		rawRequest("PATCH", props, []byte(`{"timeout":30,"retry":2}`), "Content-Type", "application/json"),
		rawRequest("GET", empty+"?t=0", nil),
		rawRequest("POST", batch, []byte("--B\r\nContent-Type: text/plain\r\n\r\none\r\n--B--\r\n"), "Content-Type", "multipart/mixed; boundary=B"),
		[]byte("POST " + push + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
	}
	for i := range 40 {
		full := complete[i%len(complete)]
		cut := 1 + rng.IntN(len(full)-1)
		cases = append(cases, hostileHTTP{family: "truncated", name: fmt.Sprintf("#%d %.60q cut at %d", i, full, cut),
			method: "GET", req: bytes.Clone(full[:cut]), want: wantBelow500, truncated: true})
	}

	// Bad percent-encodings, in every place one can be.
	// Broken escapes, and escapes of bytes that are not UTF-8 (malformed
	// only where text is expected: names, numbers, regexps, reply kinds).
	badEscapes := []string{"%zz", "%", "%g", "%2", "%%", "%0", "%x1", "%+1", "%-1", "%ZZ", "%%zz", "a%"}
	notUTF8 := []string{"%e2%82", "%c3%28", "%ff"}
	placements := []struct {
		method, target string
		body           []byte
		hdr            []string
		// keyOrID: a parameter key or a message id, where an escape of
		// non-UTF-8 bytes is well-formed (an unknown key, an id that matches
		// no delivery).
		keyOrID bool
	}{
		{"GET", "/messages/X?t=0", nil, nil, false},
		{"POST", "/messages/X", []byte("m"), nil, false},
		{"GET", "/properties/X", nil, nil, false},
		{"PATCH", "/properties/X", []byte(`{"retry":1}`), []string{"Content-Type", "application/json"}, false},
		{"GET", "/queues/X", nil, nil, false},
		{"POST", empty + "/X?reply=ack", nil, nil, true},
		{"GET", empty + "?t=X", nil, nil, false},
		{"POST", push + "?delay=X", []byte("m"), nil, false},
		{"POST", push + "?ttl=X", []byte("m"), nil, false},
		{"GET", "/messages?qre=X&t=0", nil, nil, false},
		{"POST", empty + "/" + uuid() + "?reply=X", nil, nil, false},
		{"GET", empty + "?cf=X&t=0", nil, nil, false},
		{"POST", push + "?X=1", []byte("m"), nil, true},
		{"GET", empty + "?t=0&X", nil, nil, true},
	}
	for _, p := range placements {
		for i := range 5 {
			e, want := pick(badEscapes), wantStatus(400)
			if i == 4 {
				e = pick(notUTF8)
				if p.keyOrID {
					want = wantBelow500
				}
			}
			target := strings.Replace(p.target, "X", e, 1)
			add("percent-encoding", p.method+" "+target, p.method, rawRequest(p.method, target, p.body, p.hdr...), want)
		}
	}

	// Semicolons: not a separator since Go 1.17, so a query that holds one
	// is malformed and refused, not partly dropped.
	semis := []struct{ method, target string }{
		{"GET", empty + "?t=0;x=1"}, {"GET", empty + "?t=0;"}, {"GET", empty + "?;t=0"}, {"GET", empty + "?t=0&cf=msgpack;x"},
		{"POST", push + "?delay=3600;x=1"}, {"POST", push + "?ttl=5;x"}, {"POST", push + "?delay=1;ttl=2"},
		{"GET", "/messages?qre=a;b&t=0"}, {"GET", "/messages?t=0;qre=a"}, {"POST", "/messages?qre=^hostile/none$;x=1"},
		{"POST", empty + "/" + uuid() + "?reply=ack;x=1"}, {"POST", empty + "/" + uuid() + "?x=1;reply=ack"},
		{"POST", "/messages/" + Q(hqBatch) + "?batch=1;x"}, {"GET", "/properties/" + Q(hqProps) + "?x;y"},
		{"GET", "/queues?;"}, {"GET", empty + "?t=0%3B;x"},
	}
	for _, s := range semis {
		for _, suffix := range []string{"", "&z=1"} {
			target := s.target + suffix
			add("semicolon", s.method+" "+target, s.method, rawRequest(s.method, target, nil), wantStatus(400))
		}
	}

	// 10,001 parameters: beyond Go's limit of 10,000, which then drops them.
	var many strings.Builder
	for i := range 10_000 {
		fmt.Fprintf(&many, "&p%d=%d", i, i)
	}
	for _, m := range []struct{ method, target string }{
		{"GET", empty + "?t=0" + many.String()},
		{"GET", empty + "?" + many.String()[1:] + "&t=0"},
		{"POST", push + "?delay=0" + many.String()},
		{"GET", "/messages?qre=^hostile/empty$&t=0" + many.String()},
		{"POST", empty + "/" + uuid() + "?reply=ack" + many.String()},
		{"GET", "/properties?" + many.String()[1:] + "&x=1"},
	} {
		// 414 or 431 are as good as 400 if a fix bounds the request line.
		add("many-params", fmt.Sprintf("%s %.60s… (10,001 parameters)", m.method, m.target), m.method,
			rawRequest(m.method, m.target, nil), wantStatus(400, 414, 431))
	}

	// Invalid queue names, on every route that takes one.
	names := []string{"%00", "a%01b", "%7f", "%ff", "%c3%28", "%ed%a0%80", strings.Repeat("a", 1025), strings.Repeat("n", 4000), "%0a", "%0d%0ax"}
	routes := []struct{ method, pattern string }{
		{"GET", "/messages/%s?t=0"}, {"POST", "/messages/%s"}, {"POST", "/messages/%s/" + uuid() + "?reply=ack"},
		{"GET", "/properties/%s"}, {"PATCH", "/properties/%s"}, {"DELETE", "/properties/%s"}, {"DELETE", "/queues/%s"}, {"GET", "/queues/%s"},
	}
	for _, n := range names {
		for range 4 {
			r := routes[rng.IntN(len(routes))]
			target := fmt.Sprintf(r.pattern, n)
			var body []byte
			var hdr []string
			if r.method == "PATCH" {
				body, hdr = []byte(`{"retry":1}`), []string{"Content-Type", "application/json"}
			}
			add("queue-name", fmt.Sprintf("%s %.80s", r.method, target), r.method, rawRequest(r.method, target, body, hdr...), wantStatus(400))
		}
	}
	for _, r := range []struct{ method, target string }{{"GET", "/messages/?t=0"}, {"POST", "/messages/"}, {"GET", "/properties/"}, {"DELETE", "/queues/"}} {
		add("queue-name", r.method+" "+r.target+" (empty name)", r.method, rawRequest(r.method, r.target, nil), want4xx)
	}

	// Huge header values.
	big := strings.Repeat("x", 64<<10)
	add("headers", "64 KiB Content-Type on push", "POST", rawRequest("POST", push, []byte("m"), "Content-Type", "text/plain; x="+big), wantStatus(431))
	add("headers", "64 KiB Content-Type, all one token", "POST", rawRequest("POST", push, []byte("m"), "Content-Type", "text/"+big), wantStatus(431))
	// A stored content-type is bounded far below the header block (4 KiB).
	add("headers", "5 KiB Content-Type on push", "POST", rawRequest("POST", push, []byte("m"), "Content-Type", "text/plain; x="+big[:5<<10]), wantStatus(431))
	// Where the content-type is not stored, 64 KiB may pass: net/http
	// allows 4 KiB beyond --max-header-bytes (64 KiB by default). Twice
	// that is refused everywhere.
	add("headers", "64 KiB Content-Type on a batch", "POST", rawRequest("POST", batch, []byte("m"), "Content-Type", "multipart/mixed; boundary=B; x="+big), wantBelow500)
	add("headers", "64 KiB Content-Type on PATCH", "PATCH", rawRequest("PATCH", props, []byte(`{"retry":1}`), "Content-Type", "application/json; x="+big), wantBelow500)
	add("headers", "128 KiB Content-Type on a batch", "POST", rawRequest("POST", batch, []byte("m"), "Content-Type", "multipart/mixed; boundary=B; x="+big+big), wantStatus(431))
	add("headers", "128 KiB Content-Type on PATCH", "PATCH", rawRequest("PATCH", props, []byte(`{"retry":1}`), "Content-Type", "application/json; x="+big+big), wantStatus(431))
	add("headers", "128 KiB header on pull", "GET", rawRequest("GET", empty+"?t=0", nil, "X-Big", big+big), wantStatus(431))
	add("headers", "2 MiB header", "GET", rawRequest("GET", empty+"?t=0", nil, "X-Big", strings.Repeat("y", 2<<20)), wantStatus(431))
	for _, h := range []string{"X-Junk", "User-Agent", "Cookie", "Accept", "X-Lmq-Anything"} {
		add("headers", "64 KiB "+h+" on push", "POST", rawRequest("POST", push, []byte("m"), h, big), wantBelow500)
		add("headers", "64 KiB "+h+" on pull", "GET", rawRequest("GET", empty+"?t=0", nil, h, big), wantBelow500)
	}
	var many2 []string
	for i := range 2000 {
		many2 = append(many2, fmt.Sprintf("X-H%d", i), "v")
	}
	add("headers", "2,000 headers", "POST", rawRequest("POST", push, []byte("m"), many2...), wantBelow500)

	// Absurd numbers: durations beyond any limit (issue 15 asks for one,
	// ≤ 10 years for instance; 9e9 s is 285 years, past year 2262 from now),
	// negative, not numbers.
	for _, v := range []string{"1e300", "-1", "NaN", "nan", "Inf", "+Inf", "-Inf", "infinity", "1e10", "9000000000", "-0.5", "", "0x", "1e", "--1", "1e309"} {
		add("numbers", "pull t="+v, "GET", rawRequest("GET", empty+"?t="+url.QueryEscape(v), nil), wantStatus(400))
	}
	for _, v := range []string{"1e300", "-1", "NaN", "1e10"} {
		add("numbers", "pull_any t="+v, "GET", rawRequest("GET", "/messages?qre=^hostile/empty$&t="+url.QueryEscape(v), nil), wantStatus(400))
	}
	for _, k := range []string{"delay", "ttl"} {
		for _, v := range []string{"9000000000", "1e10", "1e300", "-1", "NaN", "Inf", "abc"} {
			add("numbers", "push "+k+"="+v, "POST", rawRequest("POST", push+"?"+k+"="+url.QueryEscape(v), []byte("m")), wantStatus(400))
		}
	}
	absurdProps := []string{`{"timeout":1e10}`, `{"timeout":9e9}`, `{"accum":8e9}`, `{"accum":1e10}`, `{"ttl":1e10}`, `{"ttl":9e9}`,
		`{"timeout":1e400}`, `{"retry":1e10}`, `{"retry":99999999999999999999}`, `{"timeout":-1}`, `{"retry":-1}`, `{"pack":1e300}`}
	for _, js := range absurdProps {
		add("numbers", "PATCH "+js, "PATCH", rawRequest("PATCH", props, []byte(js), "Content-Type", "application/json"), wantStatus(400))
	}
	for _, js := range absurdProps[:6] {
		list := `[["^hostile/defaults-",` + js + `]]`
		add("numbers", "PUT "+list, "PUT", rawRequest("PUT", "/properties", []byte(list), "Content-Type", "application/json"), wantStatus(400))
	}

	// Property JSON that is malformed, of the wrong types, or nested deep.
	badProps := []string{"", "{", "}", `{"timeout":}`, `{"timeout":5`, `{"timeout":5}}`, "{} {}", "{}x", "nul", "[]", `"x"`, "1", "null", "true",
		`{"timeout":"5"}`, `{"retry":1.5}`, `{"retry":"2"}`, `{"hooks":1}`, `{"hooks":{"x":1}}`, `{"dead_letter":"yes"}`, `{"bogus":1}`,
		`{"timeout":null}`, "{\"\xff\":1}", "\xef\xbb\xbf{}", `{"accum":5,"pack":6}`, `{"timeout":[1]}`, `{"retry":{}}`,
		strings.Repeat("[", 100_000), strings.Repeat(`{"a":`, 50_000), `{"timeout":` + strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000) + "}",
		`{"` + strings.Repeat("k", 100_000) + `":1}`, `{"timeout":1,` + strings.Repeat(`"timeout":1,`, 10_000) + `"x":1}`,
	}
	for i, js := range badProps {
		add("props-json", fmt.Sprintf("PATCH #%d %.40q", i, js), "PATCH", rawRequest("PATCH", props, []byte(js), "Content-Type", "application/json"), wantStatus(400))
	}
	badLists := []string{`[["(",{}]]`, `[["a"]]`, `[[1,{}]]`, `[["a",{},1]]`, `[["a",{"timeout":"x"}]]`, `{"a":{}}`, `[{}]`, `[[null,null]]`, `["a"]`,
		`[["a","x"]]`, `[["^hostile/defaults-",{"bogus":1}]]`, `[["^hostile/defaults-",{"retry":1.5}]]`}
	for i, js := range append(badLists, badProps[:25]...) {
		if js == "[]" {
			continue // a valid (empty) default list
		}
		add("props-json", fmt.Sprintf("PUT #%d %.40q", i, js), "PUT", rawRequest("PUT", "/properties", []byte(js), "Content-Type", "application/json"), wantStatus(400))
	}
	for _, ct := range []string{"text/plain", "", "application/json; charset", "application/jsonx", "application/x-msgpack", "multipart/mixed"} {
		var hdr []string
		if ct != "" {
			hdr = []string{"Content-Type", ct}
		}
		add("props-json", "PATCH with Content-Type "+ct, "PATCH", rawRequest("PATCH", props, []byte(`{"retry":1}`), hdr...), wantStatus(415))
		add("props-json", "PUT with Content-Type "+ct, "PUT", rawRequest("PUT", "/properties", []byte(`[]`), hdr...), wantStatus(415))
	}
	// Random mutations of a valid body; they may stay valid (PATCH only: a
	// valid PUT would change the defaults of every queue).
	valid := []byte(`{"timeout":30,"retry":2,"accum":0,"dead_letter":false,"hooks":{"pre_http_push":[]}}`)
	for i := range 20 {
		b := bytes.Clone(valid)
		for range 1 + rng.IntN(3) {
			switch j := rng.IntN(len(b)); rng.IntN(3) {
			case 0:
				b[j] = byte(rng.Uint32())
			case 1:
				b = append(b[:j], b[j+1:]...)
			default:
				b = append(b[:j], append([]byte{"{}[]\",:0e-"[rng.IntN(10)]}, b[j:]...)...)
			}
		}
		add("props-json", fmt.Sprintf("PATCH mutation #%d %q", i, b), "PATCH", rawRequest("PATCH", props, b, "Content-Type", "application/json"), wantBelow500)
	}

	// Regexps in qre: invalid ones are 400; pathological valid ones are
	// harmless with RE2 (linear time).
	for _, re := range []string{"(", ")", "[", "[a-", "*", "a**", "+a", "a{1001}", "a{2,1}", `\p{Bogus}`, "(?P<n>a", "(?<", `\8`,
		"x{1000}{1000}", "((a{100}){100}){100}", "(?z)", "[[:bogus:]]", `\`, "a|*", "(?i", "(a*)*b", "(x+x+)+y", "(a|aa)*c",
		"^(([a-z])+.)+[A-Z]([a-z])+$", "(.*a){20}", "a{1000}", strings.Repeat("(", 1000) + strings.Repeat(")", 1000), "(((((((((((a*)*)*)*)*)*)*)*)*)*)*)*b"} {
		want, pushRE := wantBelow500, re
		if _, err := regexp.Compile(re); err != nil {
			want = wantStatus(400)
		} else {
			// Behind a prefix no queue has, so that a valid one pushes nowhere.
			pushRE = "^hostile/none-(?:" + re + ")"
		}
		add("regexp", "GET qre="+re, "GET", rawRequest("GET", "/messages?t=0&qre="+url.QueryEscape(re), nil), want)
		add("regexp", "POST qre="+pushRE, "POST", rawRequest("POST", "/messages?qre="+url.QueryEscape(pushRE), []byte("m")), want)
	}
	add("regexp", "GET without qre", "GET", rawRequest("GET", "/messages?t=0", nil), wantStatus(400))
	add("regexp", "POST without qre", "POST", rawRequest("POST", "/messages", []byte("m")), wantStatus(400))

	// Batch bodies that are not multipart, or hold no message.
	multi := func(ct string, body string) {
		add("batch", fmt.Sprintf("%.60q / %.60q", ct, body), "POST", rawRequest("POST", batch, []byte(body), "Content-Type", ct), wantStatus(400))
	}
	good := "--A\r\nContent-Type: text/plain\r\n\r\none\r\n--A\r\n\r\ntwo\r\n--A--\r\n"
	multi("multipart/mixed; boundary=B", good) // wrong boundary
	multi("multipart/mixed", good)             // no boundary
	multi("multipart/mixed; boundary=", good)  // empty boundary
	multi("multipart/mixed; boundary=A", "--A--\r\n")
	multi("multipart/mixed; boundary=A", "")
	multi("multipart/mixed; boundary=A", "--A\r\n\r\nno closing delimiter\r\n")
	multi("multipart/mixed; boundary=A", "--A\r\nContent-Type\r\n\r\nx\r\n--A--\r\n")
	multi("multipart/mixed; boundary=A", "preamble only, no delimiter at all")
	multi("multipart/mixed; boundary=\"A", good)
	multi("text/plain", "one message")
	multi("", good)
	multi("application/x-msgpack; x", "\x90")
	multi("application/json", "[]")
	for i := range 15 {
		b := make([]byte, 1+rng.IntN(300))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		multi(pick([]string{"multipart/mixed; boundary=A", "multipart/form-data; boundary=A", "multipart/mixed; boundary=" + strings.Repeat("b", 70)}),
			pick([]string{"", "--A\r\n"})+string(b)+fmt.Sprint(i))
	}
	for i := range 15 {
		b := []byte(good)
		for range 1 + rng.IntN(3) {
			j := rng.IntN(len(b))
			b[j] = "-\r\nA:x"[rng.IntN(6)]
		}
		add("batch", fmt.Sprintf("mutated multipart #%d %q", i, b), "POST",
			rawRequest("POST", batch, b, "Content-Type", "multipart/mixed; boundary=A"), wantBelow500)
	}

	// MessagePack batch bodies whose declared counts and lengths are far
	// beyond the bytes present, and other broken compounds.
	packed := func(name string, body []byte, want statusWant) {
		add("batch-msgpack", fmt.Sprintf("%s % x", name, body[:min(len(body), 24)]), "POST",
			rawRequest("POST", batch, body, "Content-Type", "application/x-msgpack"), want)
	}
	for _, b := range []string{
		"\xdd\xff\xff\xff\xff\x92\x80\xa1x", "\x91\xdd\xff\xff\xff\xff\x80", "\xdc\xff\xff", "\xdf\xff\xff\xff\xff",
		"\x91\x92\x80\xc6\xff\xff\xff\xff", "\xc6\xff\xff\xff\xff", "\x90", "\x91\x91\x80", "\x91\x92\x81\xa1a\x01\xa1x",
		"\x91\x92\x80\x01", "\x91\x92\x80", "\x92\x92\x80\xa1x", "\xc1", "\x91\x93\x80\xa1x\xa1y", "\x81\xa1a\x92\x80\xa1x",
	} {
		packed("fixed", []byte(b), wantStatus(400))
	}
	type decl struct {
		hdr  byte
		size int // bytes of the count
	}
	decls := []decl{{0xdc, 2}, {0xdd, 4}, {0xde, 2}, {0xdf, 4}, {0xc5, 2}, {0xc6, 4}, {0xda, 2}, {0xdb, 4}, {0xc9, 4}}
	counts := []uint32{math.MaxUint32, 1 << 31, 10_000_000, 1 << 24, math.MaxUint16}
	prefixes := []string{"", "\x91", "\x91\x92\x80", "\x91\x92", "\x92\x92\x80\xa1x\x92\x80", "\x91\x92\x81\xa1k"}
	for i := range 30 {
		d := decls[rng.IntN(len(decls))]
		n := counts[rng.IntN(len(counts))]
		if d.size == 2 {
			n = math.MaxUint16
		}
		b := []byte(prefixes[rng.IntN(len(prefixes))])
		b = append(b, d.hdr)
		if d.size == 2 {
			b = binary.BigEndian.AppendUint16(b, uint16(n))
		} else {
			b = binary.BigEndian.AppendUint32(b, n)
		}
		b = append(b, "\x92\x80\xa1x"[:rng.IntN(5)]...)
		packed(fmt.Sprintf("declared #%d", i), b, wantStatus(400))
	}
	packed("nested 100,000 deep", bytes.Repeat([]byte{0x91}, 100_000), wantStatus(400))
	packed("maps nested 50,000 deep", append(bytes.Repeat([]byte{0x81, 0xa1, 'k'}, 50_000), 0xc0), wantStatus(400))
	validCompound := []byte("\x92\x92\x81\xacContent-Type\xaatext/plain\xa3one\x92\x80\xa3two")
	for i := range 8 {
		packed(fmt.Sprintf("truncated compound #%d", i), validCompound[:1+rng.IntN(len(validCompound)-1)], wantStatus(400))
	}
	for i := range 8 {
		b := make([]byte, 1+rng.IntN(64))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		packed(fmt.Sprintf("random #%d", i), b, want4xx)
	}

	// Replies to ids that are stale or not ids, and reply kinds that do not exist.
	for _, k := range []string{"ack", "nack", "ext"} {
		for range 3 {
			add("reply", "stale id "+k, "POST", rawRequest("POST", empty+"/"+uuid()+"?reply="+k, nil), wantStatus(404))
		}
	}
	for _, id := range []string{"x", "0", strings.Repeat("z", 36), strings.ToUpper(uuid()), uuid() + "x", strings.Repeat("a", 10_000), "%00", "..", "%2F", "%20"} {
		add("reply", fmt.Sprintf("id %.40q", id), "POST", rawRequest("POST", empty+"/"+id+"?reply=ack", nil), want4xx)
	}
	for _, k := range []string{"foo", "ACK", "", "ack%20", "ack%00", "nack,ack", "done", "release", "retain", strings.Repeat("k", 5000)} {
		add("reply", fmt.Sprintf("kind %.40q", k), "POST", rawRequest("POST", empty+"/"+uuid()+"?reply="+k, nil), wantStatus(400))
	}
	add("reply", "no reply parameter", "POST", rawRequest("POST", empty+"/"+uuid(), nil), wantStatus(400))
	add("reply", "reply twice", "POST", rawRequest("POST", empty+"/"+uuid()+"?reply=ack&reply=nack", nil), want4xx)

	// Methods a route does not have.
	routeMethods := map[string][]string{
		"/messages":                       {"GET", "POST"},
		empty:                             {"GET", "POST"},
		empty + "/" + uuid():              {"POST"},
		"/queues":                         {"GET"},
		"/queues/" + Q(hqEmpty):           {"GET", "DELETE"},
		"/properties":                     {"GET", "PUT", "DELETE"},
		"/properties/" + Q(hqEmpty):       {"GET", "PATCH", "DELETE"},
		"/msgs/" + Q(hqEmpty):             {"GET", "POST"},
		"/props/" + Q(hqEmpty):            {"GET", "PATCH", "DELETE"},
		"/queues/" + Q(hqEmpty) + "/dead": {"GET", "DELETE"},
		"/":                               {},
		"/nonexistent":                    {},
	}
	var paths []string
	for p := range routeMethods {
		paths = append(paths, p)
	}
	slices.Sort(paths) // map order is random; the cases are not

	for range 40 {
		p := pick(paths)
		var m string
		for {
			m = pick([]string{"PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "FOO", "HEAD", "POST", "GET", "M-SEARCH", "PROPFIND"})
			if !slices.Contains(routeMethods[p], m) {
				break
			}
		}
		add("method", m+" "+p, m, rawRequest(m, p, nil), want4xx)
	}
	return cases
}

// ---- MessagePack-RPC ----

// hostileRPC is one connection's worth of bytes and what must come back.
type hostileRPC struct {
	family, name string
	frames       []byte
	want         rpcWant
}

type rpcWant int

const (
	// rpcAnyReaction: the server may answer (well-formed answers only) or
	// close the connection; it must not crash.
	rpcAnyReaction rpcWant = iota
	// rpcWantError: a well-formed request the server must answer with an
	// error (msgid 1), keeping the connection open.
	rpcWantError
)

// sendRawRPC writes frames on a fresh connection. With one set, it reads a
// single answer and closes. Otherwise it half-closes the connection (so that
// the server sees the client's end and stops waiting pulls) and reads every
// answer until the server closes.
//
// A request whose error answer is checked must not be half-closed: the
// server then stops pulls it has not answered, and a pull with a bad name
// answers "empty" instead of its error.
func sendRawRPC(addr string, frames []byte, one bool) ([]rpcResponse, error) {
	conn, err := net.DialTimeout("tcp", addr, hostileAnswerWait)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(hostileAnswerWait))
	_, werr := conn.Write(frames)
	if !one {
		_ = conn.(*net.TCPConn).CloseWrite()
	}
	d := newMPDecoder(conn)
	var answers []rpcResponse
	for !one || len(answers) == 0 {
		v, err := d.decode()
		if err != nil {
			switch {
			case errors.Is(err, io.EOF):
				return answers, nil // closed between answers
			case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
				// The server cut a connection it found garbage on, possibly
				// in the middle of an answer to an earlier request.
				return answers, nil
			case isTimeout(err):
				if one {
					return answers, fmt.Errorf("no answer within %v (write: %v)", hostileAnswerWait, werr)
				}
				return answers, fmt.Errorf("the server neither answered nor closed within %v of the client's end (write: %v)", hostileAnswerWait, werr)
			}
			return answers, fmt.Errorf("malformed answer (% x): %w", d.raw[:min(len(d.raw), 40)], err)
		}
		resp, err := rpcParseResponse(v)
		if err != nil {
			return answers, fmt.Errorf("malformed answer: %w", err)
		}
		answers = append(answers, resp)
	}
	return answers, nil
}

func (hc hostileRPC) judge(answers []rpcResponse, err error) string {
	if err != nil {
		return err.Error()
	}
	if hc.want != rpcWantError {
		return ""
	}
	switch {
	case len(answers) != 1:
		return fmt.Sprintf("%d answers, want one error", len(answers))
	case answers[0].MsgID != 1:
		return fmt.Sprintf("answer to msgid %d, want 1", answers[0].MsgID)
	case answers[0].Err == nil:
		return fmt.Sprintf("result %s, want an error", rpcShort(answers[0].Result))
	}
	return ""
}

func runHostileRPC(t *testing.T, addr string, cases []hostileRPC, exited <-chan struct{}) {
	t.Helper()
	type outcome struct {
		answers []rpcResponse
		err     error
	}
	outcomes := make([]outcome, len(cases))
	sent := runPool(len(cases), exited, func(i int) {
		a, err := sendRawRPC(addr, cases[i].frames, cases[i].want == rpcWantError)
		outcomes[i] = outcome{a, err}
	})
	reportFamilies(t, "RPC", sent,
		func(i int) (string, string) { return cases[i].family, cases[i].name },
		func(i int) string { return cases[i].judge(outcomes[i].answers, outcomes[i].err) })
}

// rpcFrame encodes [0, 1, method, params] with any types for both.
func rpcFrame(method, params any) []byte {
	e := mpEncoder{}
	b := mpAppendArrayHeader(nil, 4)
	b = append(b, 0x00, 0x01)
	b = e.encode(b, method)
	return e.encode(b, params)
}

// hostileRPCCases generates the RPC cases.
func hostileRPCCases(rng *rand.Rand) []hostileRPC {
	var cases []hostileRPC
	add := func(family, name string, frames []byte, want rpcWant) {
		cases = append(cases, hostileRPC{family: family, name: name, frames: frames, want: want})
	}
	randBytes := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	ext := mpRaw{0xd4, 0x01, 0x00}
	bin := mpRaw{0xc4, 0x01, '5'}
	uuid := func() string {
		b := randBytes(16)
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	}

	// Random bytes, and random bytes after a request header.
	for i := range 100 {
		b := randBytes(1 + rng.IntN(512))
		if i%3 == 0 {
			b = append([]byte{0x94, 0x00, byte(rng.IntN(128))}, b...)
		}
		add("random-bytes", fmt.Sprintf("#%d % x", i, b[:min(len(b), 16)]), b, rpcAnyReaction)
	}
	// Random sequences of MessagePack headers, and a good request followed
	// by garbage.
	heads := []byte{0x90, 0x91, 0x94, 0x9f, 0x80, 0x81, 0xa0, 0xa4, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc7, 0xca, 0xcb, 0xcc, 0xcf, 0xd0,
		0xd4, 0xd8, 0xd9, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0x00, 0x7f}
	for i := range 60 {
		var b []byte
		for range 1 + rng.IntN(24) {
			b = append(b, heads[rng.IntN(len(heads))])
			b = append(b, randBytes(rng.IntN(5))...)
		}
		if i%3 == 0 {
			b = append(rpcFrame("get_default_props", []any{}), b...)
		}
		add("msgpack-tokens", fmt.Sprintf("#%d % x", i, b[:min(len(b), 16)]), b, rpcAnyReaction)
	}

	// Valid requests cut short.
	whole := [][]byte{
		rpcFrame("push", []any{hqRPC, "content"}),
		rpcFrame("push", []any{hqRPC, map[string]any{"k": []any{1, 2.5, "x"}}, map[string]any{"delay": 1}}),
		rpcFrame("pull", []any{hqRPC, 0}),
		rpcFrame("pull_any", []any{"^hostile/rpc$", 0.5}),
		rpcFrame("push_all", []any{"^hostile/none$", "x"}),
		rpcFrame("done", []any{hqRPC, uuid()}),
		rpcFrame("update_props", []any{hqRPC, map[string]any{"timeout": 30, "retry": 2}}),
		rpcFrame("set_default_props", []any{[]any{[]any{"^hostile/defaults-", map[string]any{"retry": 1}}}}),
		rpcFrame("get_default_props", []any{}),
	}
	for i := range 80 {
		w := whole[i%len(whole)]
		cut := 1 + rng.IntN(len(w)-1)
		add("truncated", fmt.Sprintf("#%d % x… cut at %d of %d", i, w[:min(len(w), 12)], cut, len(w)), bytes.Clone(w[:cut]), rpcAnyReaction)
	}

	// Declared lengths far beyond the bytes sent.
	lengths := []uint32{math.MaxUint32, 1 << 31, 1 << 26, 1<<26 - 1, 10_000_000}
	where := []struct {
		name   string
		prefix []byte
	}{
		{"frame", nil},
		{"msgid", []byte{0x94, 0x00}},
		{"method", []byte{0x94, 0x00, 0x01}},
		{"params", append([]byte{0x94, 0x00, 0x01}, mpEncoder{}.encode(nil, "push")...)},
		{"push content", append(append([]byte{0x94, 0x00, 0x01}, mpEncoder{}.encode(nil, "push")...), append([]byte{0x92}, mpEncoder{}.encode(nil, hqRPC)...)...)},
		{"props", append(append([]byte{0x94, 0x00, 0x01}, mpEncoder{}.encode(nil, "update_props")...), append([]byte{0x92}, mpEncoder{}.encode(nil, hqRPC)...)...)},
		{"default list", append(append([]byte{0x94, 0x00, 0x01}, mpEncoder{}.encode(nil, "set_default_props")...), 0x91)},
	}
	hdrs := []byte{0xdd, 0xdf, 0xdb, 0xc6, 0xc9}
	for i := range 45 {
		w := where[i%len(where)]
		h := hdrs[rng.IntN(len(hdrs))]
		n := lengths[rng.IntN(len(lengths))]
		b := append(bytes.Clone(w.prefix), h)
		b = binary.BigEndian.AppendUint32(b, n)
		if h == 0xc9 {
			b = append(b, 0x01) // the ext type
		}
		b = append(b, randBytes(rng.IntN(32))...)
		add("huge-length", fmt.Sprintf("#%d %s 0x%02x %d", i, w.name, h, n), b, rpcAnyReaction)
	}

	// Nesting bombs, and a wide array.
	nest := func(n int) mpRaw { return append(bytes.Repeat([]byte{0x91}, n), 0xc0) }
	for _, n := range []int{65, 1000, 100_000, 1_000_000} {
		add("nesting", fmt.Sprintf("frame of %d arrays", n), nest(n), rpcAnyReaction)
		add("nesting", fmt.Sprintf("frame of %d maps", n), append(bytes.Repeat([]byte{0x81, 0xa1, 'k'}, n), 0xc0), rpcAnyReaction)
	}
	for _, n := range []int{10, 60, 64, 65, 100, 10_000} {
		add("nesting", fmt.Sprintf("push content %d deep", n), rpcFrame("push", []any{hqRPC, nest(n)}), rpcAnyReaction)
		add("nesting", fmt.Sprintf("props %d deep", n), rpcFrame("update_props", []any{hqRPC, map[string]any{"timeout": nest(n)}}), rpcAnyReaction)
		add("nesting", fmt.Sprintf("default list %d deep", n), rpcFrame("set_default_props", []any{nest(n)}), rpcAnyReaction)
	}
	wide := mpAppendArrayHeader(nil, 65535)
	wide = append(wide, bytes.Repeat([]byte{0xc0}, 65535)...)
	add("nesting", "default list of 65,535 nils", rpcFrame("set_default_props", []any{mpRaw(wide)}), rpcWantError)
	add("nesting", "props holding 65,535 nils", rpcFrame("update_props", []any{hqRPC, map[string]any{"hooks": mpRaw(wide)}}), rpcWantError)

	// Envelopes of the wrong shape: msgid, type field, length.
	e := mpEncoder{}
	for _, id := range []any{"1", -1, uint64(1) << 32, uint64(math.MaxUint64), 1.5, nil, true, []any{}, map[string]any{}, bin, ext} {
		b := mpAppendArrayHeader(nil, 4)
		b = append(b, 0x00)
		b = e.encode(b, id)
		b = e.encode(b, "get_default_props")
		b = e.encode(b, []any{})
		add("envelope", fmt.Sprintf("msgid %#v", id), b, rpcAnyReaction)
	}
	for _, env := range [][]any{
		{1, 1, "get_default_props", []any{}}, {3, 1, "get_default_props", []any{}}, {-1, 1, "get_default_props", []any{}},
		{"0", 1, "get_default_props", []any{}}, {nil, 1, "get_default_props", []any{}}, {0, "get_default_props", []any{}},
		{2, 1, "get_default_props", []any{}}, {}, {0}, {0, 1}, {0, 1, "get_default_props", []any{}, 5},
		{2, "push", []any{hqRPC}}, {2, 7, []any{}}, {2, "no_such_method", nil},
		make([]any, 15),
	} {
		add("envelope", fmt.Sprintf("%#v", env), e.encode(nil, env), rpcAnyReaction)
	}
	for _, v := range []any{0, "get_default_props", map[string]any{}, nil, 1.5, mpRaw{0xc1}} {
		add("envelope", fmt.Sprintf("frame %#v", v), e.encode(nil, v), rpcAnyReaction)
	}

	// Arguments of the wrong type, for every method and argument that has
	// a type; the other arguments are valid, so the answer must be an error.
	mustFail := func(family, method string, params ...any) {
		add(family, fmt.Sprintf("%s%s", method, rpcShort(params)), rpcFrame(method, params), rpcWantError)
	}
	notStrings := []any{nil, true, false, 42, -1, 1.5, math.NaN(), []any{}, []any{hqRPC}, map[string]any{}, ext}
	badNames := []any{"", "\x00", "a\x01b", strings.Repeat("a", 1025), "\xff\xfe"}
	nameArgs := map[string]func(name any) []any{
		"push":         func(n any) []any { return []any{n, "x"} },
		"pull":         func(n any) []any { return []any{n, 0} },
		"done":         func(n any) []any { return []any{n, uuid()} },
		"retain":       func(n any) []any { return []any{n, uuid()} },
		"release":      func(n any) []any { return []any{n, uuid()} },
		"delete":       func(n any) []any { return []any{n} },
		"update_props": func(n any) []any { return []any{n, map[string]any{"retry": 1}} },
	}
	for _, m := range []string{"push", "pull", "done", "retain", "release", "delete", "update_props"} {
		for _, n := range append(append([]any{}, notStrings...), badNames...) {
			mustFail("args-name", m, nameArgs[m](n)...)
		}
	}
	for _, m := range []string{"done", "retain", "release"} {
		for _, id := range append(append([]any{}, notStrings...), "", "x", strings.Repeat("i", 300), "\x00", uuid(), uuid()) {
			mustFail("args-id", m, hqRPC, id)
		}
	}
	badRegexps := []any{"(", "[", "a**", "a{1001}", `\p{Bogus}`, "x{2,1}"}
	for _, m := range []string{"push_all", "pull_any"} {
		for _, re := range append(append([]any{}, notStrings...), badRegexps...) {
			if m == "push_all" {
				mustFail("args-regexp", m, re, "x")
			} else {
				mustFail("args-regexp", m, re, 0)
			}
		}
	}
	// Timeouts that are no number of seconds, or beyond any limit.
	badWaits := []any{nil, true, "5", bin, []any{}, map[string]any{}, ext, -1, -0.001, math.NaN(), math.Inf(1), math.Inf(-1),
		1e300, 1e10, 9e9, uint64(math.MaxUint64)}
	for _, w := range badWaits {
		mustFail("args-timeout", "pull", hqEmpty, w)
		mustFail("args-timeout", "pull_any", "^hostile/empty$", w)
	}
	notMaps := []any{nil, true, 42, "x", []any{}, []any{"delay", 1}, ext}
	for _, o := range notMaps {
		mustFail("args-options", "push", hqRPC, "x", o)
	}
	for _, o := range []any{
		map[string]any{"delay": 9e9}, map[string]any{"ttl": 9e9}, map[string]any{"delay": 1e300}, map[string]any{"delay": -1},
		map[string]any{"ttl": math.NaN()}, map[string]any{"delay": "5"}, map[string]any{"bogus": 1}, map[string]any{"delay": nil},
		map[string]any{"ttl": []any{}}, mpMap{{Key: 1, Val: 2}}, map[string]any{"ttl": uint64(math.MaxUint64)},
	} {
		mustFail("args-options", "push", hqRPC, "x", o)
	}
	for _, p := range notMaps {
		mustFail("args-props", "update_props", hqRPC, p)
	}
	for _, p := range []any{
		map[string]any{"timeout": 1e10}, map[string]any{"timeout": 9e9}, map[string]any{"accum": 8e9}, map[string]any{"accum": 1e10},
		map[string]any{"ttl": 1e10}, map[string]any{"retry": -1}, map[string]any{"retry": 1.5}, map[string]any{"retry": 1e10},
		map[string]any{"retry": uint64(math.MaxUint64)}, map[string]any{"timeout": "5"}, map[string]any{"timeout": nil},
		map[string]any{"hooks": 5}, map[string]any{"dead_letter": "yes"}, map[string]any{"bogus": 1}, map[string]any{"timeout": math.NaN()},
		map[string]any{"timeout": math.Inf(-1)}, mpMap{{Key: 1, Val: 2}}, map[string]any{"accum": 5, "pack": 6}, map[string]any{"pack": 1e300},
	} {
		mustFail("args-props", "update_props", hqRPC, p)
	}
	for _, l := range []any{
		"x", 5, nil, map[string]any{}, true, ext,
		[]any{[]any{"(", map[string]any{}}}, []any{[]any{"a"}}, []any{[]any{1, map[string]any{}}},
		[]any{[]any{"^hostile/defaults-", map[string]any{}, 1}}, []any{[]any{"^hostile/defaults-", map[string]any{"timeout": 1e10}}},
		[]any{[]any{"^hostile/defaults-", "x"}}, []any{map[string]any{}}, []any{[]any{nil, nil}}, []any{"a"},
	} {
		mustFail("args-defaults", "set_default_props", l)
	}
	// Wrong numbers of arguments, and params that are no array.
	for _, call := range []struct {
		method string
		params []any
	}{
		{"push", nil}, {"push", []any{hqRPC}}, {"push", []any{hqRPC, "x", map[string]any{}, 1}},
		{"pull", nil}, {"pull", []any{hqEmpty, 0, 1}},
		{"push_all", nil}, {"push_all", []any{"^hostile/none$"}}, {"push_all", []any{"^hostile/none$", "x", 1}},
		{"pull_any", nil}, {"pull_any", []any{"^hostile/empty$", 0, 1}},
		{"done", []any{hqRPC}}, {"done", []any{hqRPC, uuid(), 1}}, {"retain", []any{hqRPC}}, {"retain", []any{hqRPC, uuid(), 1}},
		{"release", nil}, {"release", []any{hqRPC, uuid(), 1}}, {"delete", nil}, {"delete", []any{hqRPC, 1}},
		{"update_props", nil}, {"update_props", []any{hqRPC, map[string]any{}, 1}},
		{"set_default_props", nil}, {"set_default_props", []any{[]any{}, 1}}, {"get_default_props", []any{1}},
		{"get_default_props", make([]any, 9)}, {"push", make([]any, 100)},
	} {
		mustFail("arity", call.method, call.params...)
	}
	for _, m := range []string{"push", "pull", "push_all", "pull_any", "done", "retain", "release", "delete", "update_props", "set_default_props", "get_default_props"} {
		for _, p := range []any{nil, "x", map[string]any{}, 5} {
			add("arity", fmt.Sprintf("%s with params %#v", m, p), rpcFrame(m, p), rpcWantError)
		}
	}
	for _, m := range []any{"create", "", "PUSH", "push\x00", strings.Repeat("m", 1000), 5, nil, []any{"push"}, bin, "get_default_props "} {
		add("method", fmt.Sprintf("method %.40q", fmt.Sprint(m)), rpcFrame(m, []any{}), rpcWantError)
	}
	return cases
}
