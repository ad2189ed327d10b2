package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/clientgone"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/lmqexporter"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnet"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/internal/route"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// fakeCore serves queue infos from a map, without JetStream.
type fakeCore struct {
	mu      sync.Mutex
	queues  map[string]gateway.QueueInfo
	closing chan struct{}
	calls   int
	// storeErr is StoreFailure's answer.
	storeErr error
	// waiting is WaitingPulls' answer.
	waiting int
	// probeOK makes ProbeStore succeed (JetStream answers).
	probeOK bool
}

func newFakeCore(qs ...gateway.QueueInfo) *fakeCore {
	c := &fakeCore{queues: map[string]gateway.QueueInfo{}, closing: make(chan struct{})}
	for _, q := range qs {
		c.queues[q.Name] = q
	}
	return c
}

func (c *fakeCore) QueueNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := keys(c.queues)
	sort.Strings(names) // as the core's
	return names
}

func (c *fakeCore) QueueStatuses(context.Context, gateway.Scope) ([]gateway.QueueStatus, error) {
	names := c.QueueNames()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	out := make([]gateway.QueueStatus, 0, len(names))
	for _, name := range names {
		out = append(out, gateway.QueueStatus{QueueInfo: c.queues[name], Nodes: []string{}, Current: []string{}})
	}
	return out, nil
}

func (c *fakeCore) InFlight() int                   { return 3 }
func (c *fakeCore) InFlightByQueue() map[string]int { return nil }
func (c *fakeCore) Closing() <-chan struct{}        { return c.closing }
func (c *fakeCore) StoreFailures() uint64           { return 0 }
func (c *fakeCore) Peers() []string                 { return []string{"0a0b0c0d"} }

// ProbeStore fails, unless probeOK: the fake has no JetStream.
func (c *fakeCore) ProbeStore(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.probeOK {
		return nil
	}
	return errors.New("no JetStream")
}

func (c *fakeCore) WaitingPulls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting
}

func (c *fakeCore) StoreFailure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.storeErr
}

func props() mapping.Effective { return mapping.Effective{Retry: 2, Timeout: 30} }

func get(t *testing.T, h http.Handler, path string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// handler builds what httpapi builds around Ops: a router with the API's
// pull route (which waits until release is closed or the client leaves; nil
// answers at once), the
// Mount hook and the Middleware.
func handler(o *Ops, release <-chan struct{}) http.Handler {
	if release == nil {
		ch := make(chan struct{})
		close(ch)
		release = ch
	}
	t := route.NewTable()
	t.HandleFunc("/messages/{name}", route.OnQueue(route.RightPull), func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	}, http.MethodGet)
	t.HandleFunc("/messages/{name}", route.OnQueue(route.RightPush), func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"accum":"no"}`)
	}, http.MethodPost)
	o.Mount(t)
	return o.Middleware(t)
}

func TestStatsDocumentEmpty(t *testing.T) {
	o := New(coreOf(newFakeCore()), NewStats(StatsOptions{}), Options{})
	w := get(t, handler(o, nil), "/stats")
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /stats: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	// LMQ printed "queues":[] here, which broke its own exporter.
	if want := `{"active_nodes":[],"all_nodes":[],"queues":{}}`; w.Body.String() != want {
		t.Errorf("empty /stats = %s, want %s", w.Body, want)
	}
}

func TestStatsDocumentShape(t *testing.T) {
	core := newFakeCore(
		gateway.QueueInfo{Name: "jobs", Size: 7, Bytes: 700, Props: props()},
		gateway.QueueInfo{Name: "idle", Props: mapping.Effective{Accum: 0.5, Retry: 0, Timeout: 1}},
	)
	stats := NewStats(StatsOptions{})
	for range 3 {
		stats.Pushed("jobs", 100)
	}
	stats.Pulled("jobs", time.Second)
	stats.Pulled("jobs", 3*time.Second)
	o := New(coreOf(core), stats, Options{Nodes: func(context.Context) (Nodes, error) {
		return Nodes{Active: []string{"n1"}, All: []string{"n2", "n1"}}, nil
	}})
	w := get(t, handler(o, nil), "/stats")

	var ex lmqexporter.Stats
	if err := json.Unmarshal(w.Body.Bytes(), &ex); err != nil {
		t.Fatalf("exporter struct cannot parse /stats: %v\n%s", err, w.Body)
	}
	if fmt.Sprint(ex.ActiveNodes, ex.AllNodes) != "[n1] [n1 n2]" {
		t.Errorf("nodes %v %v", ex.ActiveNodes, ex.AllNodes)
	}
	j := ex.Queues["jobs"]
	if j.Size != 7 || j.Memory != 700 || j.Stats.Push.Count != 3 || j.Stats.Pull.Count != 2 {
		t.Errorf("jobs: %+v", j)
	}
	if r := j.Stats.Retention; r.Min != 1 || r.Max != 3 || r.ArithmeticMean != 2 || r.Median != 1 {
		t.Errorf("retention %+v", r)
	}
	if _, ok := ex.Queues["idle"]; !ok {
		t.Errorf("a queue without events is missing")
	}

	// Every key LMQ printed is there, with its JSON type.
	var raw map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	q := raw["queues"].(map[string]any)["idle"].(map[string]any)
	for _, k := range []string{"stats", "size", "memory", "nodes", "props"} {
		if _, ok := q[k]; !ok {
			t.Errorf("queue lacks %q", k)
		}
	}
	if p := q["props"].(map[string]any); p["accum"] != 0.5 || p["retry"] != 0.0 || p["timeout"] != 1.0 {
		t.Errorf("props %v", p)
	}
	st := q["stats"].(map[string]any)
	for _, m := range []string{"push", "pull"} {
		for _, k := range []string{"count", "one", "five", "fifteen", "day"} {
			if _, ok := st[m].(map[string]any)[k].(float64); !ok {
				t.Errorf("stats.%s.%s missing or not a number", m, k)
			}
		}
	}
	ret := st["retention"].(map[string]any)
	for _, k := range []string{"min", "max", "arithmetic_mean", "median", "n"} {
		if _, ok := ret[k].(float64); !ok {
			t.Errorf("retention.%s missing", k)
		}
	}
	if h, ok := ret["histogram"].([]any); !ok || len(h) == 0 {
		t.Errorf("retention.histogram missing or empty: %v", ret["histogram"])
	} else if b, ok := h[0].(map[string]any); !ok || b["bin"] == nil || b["count"] == nil {
		t.Errorf("retention.histogram[0] = %v, want {bin, count}", h[0])
	}
	pc := ret["percentile"].(map[string]any)
	for _, k := range []string{"50", "75", "90", "95", "99", "999"} {
		if _, ok := pc[k].(float64); !ok {
			t.Errorf("retention.percentile.%s missing", k)
		}
	}
	if !bytes.Contains(w.Body.Bytes(), []byte(`"count":3,`)) {
		t.Errorf("count is not an integer: %s", w.Body)
	}
}

func TestInventoryCachedAndBounded(t *testing.T) {
	core := newFakeCore(gateway.QueueInfo{Name: "a"}, gateway.QueueInfo{Name: "b"}, gateway.QueueInfo{Name: "c"})
	o := New(coreOf(core), NewStats(StatsOptions{}), Options{StatsTTL: time.Hour, MaxQueues: 2})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			views, err := o.Queues(t.Context(), nil)
			if err != nil || len(views) != 2 {
				t.Errorf("views %v, %v", views, err)
			}
		})
	}
	wg.Wait()
	if core.calls != 1 {
		t.Errorf("%d collections for 8 concurrent askers, want 1", core.calls)
	}
}

func TestMetricsNames(t *testing.T) {
	core := newFakeCore(gateway.QueueInfo{Name: "m", Size: 4, Bytes: 40, InFlight: 1, Props: props()})
	stats := NewStats(StatsOptions{})
	stats.Pushed("m", 3)
	stats.Pulled("m", time.Millisecond)
	stats.Replied("m", gateway.Ack)
	o := New(coreOf(core), stats, Options{Version: "v9"})
	h := handler(o, nil)
	get(t, h, "/messages/m?t=0") // one request for the request histogram
	get(t, h, "/nowhere")
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("BREW", "/messages/m", nil))
	body := get(t, h, "/metrics").Body.String()
	for _, want := range []string{
		`lmq_pushes_total{queue="m"} 1`,
		`lmq_push_bytes_total{queue="m"} 3`,
		`lmq_pulls_total{queue="m"} 1`,
		`lmq_acks_total{queue="m"} 1`,
		`lmq_nacks_total{queue="m"} 0`,
		`lmq_extends_total{queue="m"} 0`,
		`lmq_timeouts_total{queue="m"} 0`,
		`lmq_discarded_total{queue="m"} 0`,
		`lmq_retention_seconds_bucket{queue="m",le="0.001"} 1`,
		`lmq_retention_seconds_count{queue="m"} 1`,
		`lmq_queue_depth{queue="m"} 4`,
		`lmq_queue_bytes{queue="m"} 40`,
		`lmq_queue_in_flight{queue="m"} 1`,
		`lmq_queues 1`,
		`lmq_deliveries_in_flight 3`,
		`lmq_long_polls_waiting 0`,
		`lmq_gateway_peers 1`,
		`lmq_rpc_connections 0`,
		`lmq_build_info{goversion="go`,
		`version="v9"} 1`,
		`lmq_http_request_duration_seconds_count{code="204",method="GET",route="/messages/{name}"} 1`,
		`lmq_http_request_duration_seconds_count{code="404",method="GET",route="other"} 1`,
		`lmq_http_request_duration_seconds_count{code="405",method="other",route="other"} 1`,
		"go_goroutines ",
		"go_memstats_alloc_bytes ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// The process collector only works where /proc does.
	if _, err := io.ReadAll(strings.NewReader("")); err == nil && !strings.Contains(body, "process_") {
		t.Logf("no process_ metrics on this platform")
	}
}

func TestAuth(t *testing.T) {
	o := New(coreOf(newFakeCore()), NewStats(StatsOptions{}), Options{Auth: auth.Credential{BearerToken: "s3cret", BasicUser: "u", BasicPassword: "p"}})
	h := handler(o, nil)
	for _, path := range []string{"/stats", "/metrics", "/messages/q?t=0", "/nowhere"} {
		w := get(t, h, path)
		if w.Code != http.StatusUnauthorized || !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("GET %s without credentials: %d %q", path, w.Code, w.Header().Get("WWW-Authenticate"))
		}
		if w := get(t, h, path, "Authorization", "Bearer wrong"); w.Code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d", path, w.Code)
		}
	}
	if w := get(t, h, "/stats", "Authorization", "Bearer s3cret"); w.Code != http.StatusOK {
		t.Errorf("with the token: %d", w.Code)
	}
	req := httptest.NewRequest(http.MethodGet, "/stats", nil)
	req.SetBasicAuth("u", "p")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Errorf("with basic auth: %d", w.Code)
	}
	if w := get(t, h, "/healthz"); w.Code != http.StatusOK {
		t.Errorf("/healthz must not ask for credentials: %d", w.Code)
	}
	if w := get(t, h, "/readyz"); w.Code == http.StatusUnauthorized {
		t.Errorf("/readyz must not ask for credentials")
	}
}

func TestAccessLog(t *testing.T) {
	for _, on := range []bool{true, false} {
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		o := New(coreOf(newFakeCore()), NewStats(StatsOptions{}), Options{Logger: log, AccessLog: on})
		h := handler(o, nil)
		req := httptest.NewRequest(http.MethodPost, "/messages/a%2Fb?x=1", strings.NewReader("hi"))
		h.ServeHTTP(httptest.NewRecorder(), req)
		if !on {
			if buf.Len() != 0 {
				t.Errorf("access log off, but: %s", buf.String())
			}
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
			t.Fatalf("access log line %q: %v", buf.String(), err)
		}
		if rec["method"] != "POST" || rec["path"] != "/messages/a%2Fb" || rec["status"] != 200.0 || rec["bytes"] != 14.0 || rec["query"] != "x=1" {
			t.Errorf("access log line %v", rec)
		}
		if _, ok := rec["duration"].(float64); !ok {
			t.Errorf("no duration in %v", rec)
		}
	}
}

// TestWaitingPullsGauge: the gauge shows the core's count of waiting pulls
// (HTTP and RPC alike), and ops itself neither counts nor limits pulls: the
// limit is the core's (gateway.Config.MaxWaitingPulls; its 503 is httpapi's,
// see httpapi's TestErrorMapping), so a pull route passes through ops as any
// other while the core counts far beyond any limit.
func TestWaitingPullsGauge(t *testing.T) {
	core := newFakeCore()
	o := New(coreOf(core), NewStats(StatsOptions{}), Options{})
	core.mu.Lock()
	core.waiting = 7
	core.mu.Unlock()
	if body := get(t, handler(o, nil), "/metrics").Body.String(); !strings.Contains(body, "lmq_long_polls_waiting 7") {
		t.Errorf("gauge does not show the core's 7 waiting pulls:\n%s", body)
	}
	if w := get(t, handler(o, nil), "/messages/q"); w.Code != http.StatusNoContent {
		t.Errorf("pull through ops: %d, want the handler's 204", w.Code)
	}
}

// listenRPC is o's counting RPC listener on a loopback port, closed
// when the test ends.
func listenRPC(t *testing.T, o *Ops) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wl := o.Metrics().RPCListener(l)
	t.Cleanup(func() { wl.Close() })
	return wl
}

func TestRPCListenerCounts(t *testing.T) {
	o := New(coreOf(newFakeCore()), NewStats(StatsOptions{}), Options{})
	wl := listenRPC(t, o)
	var server []net.Conn
	for range 2 {
		_, s := testnet.Accept(t, wl)
		server = append(server, s)
	}
	gauge := func() string {
		for _, line := range strings.Split(get(t, handler(o, nil), "/metrics").Body.String(), "\n") {
			if strings.HasPrefix(line, "lmq_rpc_connections ") {
				return line
			}
		}
		return ""
	}
	if g := gauge(); g != "lmq_rpc_connections 2" {
		t.Errorf("two connections: %q", g)
	}
	server[0].Close()
	server[0].Close() // closing twice counts once
	if g := gauge(); g != "lmq_rpc_connections 1" {
		t.Errorf("after a close: %q", g)
	}
	server[1].Close()
}

// packets collects StatsD datagrams.
type packets struct{ p []string }

func (p *packets) Write(b []byte) (int, error) {
	p.p = append(p.p, string(b))
	return len(b), nil
}

func (p *packets) lines() []string {
	var out []string
	for _, pk := range p.p {
		out = append(out, strings.Split(pk, "\n")...)
	}
	return out
}

func TestStatsDFlush(t *testing.T) {
	core := newFakeCore(gateway.QueueInfo{Name: "a.b:c", Size: 2, Bytes: 20})
	stats := NewStats(StatsOptions{StatsdSamples: 2})
	o := New(coreOf(core), stats, Options{StatsTTL: time.Nanosecond})
	sd := o.NewStatsD("127.0.0.1:8125", time.Second)
	stats.Pushed("a.b:c", 1)
	stats.Pushed("a.b:c", 1)
	for range 4 {
		stats.Pulled("a.b:c", 1500*time.Millisecond)
	}
	var p packets
	sd.Flush(t.Context(), &p)
	got := strings.Join(p.lines(), "\n")
	for _, want := range []string{
		"lmq.a.b_c.push:2|c",
		"lmq.a.b_c.pull:4|c",
		"lmq.a.b_c.retention:1500.000|ms|@0.5",
		"lmq.a.b_c.size:2|g",
		"lmq.a.b_c.memory:20|g",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("StatsD lacks %q in:\n%s", want, got)
		}
	}
	if n := strings.Count(got, ".retention:"); n != 2 {
		t.Errorf("%d retention samples, want 2 (the bound)", n)
	}
	// The next flush has no new events, only the gauges.
	p = packets{}
	sd.Flush(t.Context(), &p)
	if got := strings.Join(p.lines(), "\n"); strings.Contains(got, "|c") || !strings.Contains(got, "size:2|g") {
		t.Errorf("second flush:\n%s", got)
	}
	// Many queues: datagrams stay under the MTU.
	for i := range 200 {
		stats.Pushed(fmt.Sprintf("queue-with-a-longish-name-%03d", i), 1)
	}
	p = packets{}
	sd.Flush(t.Context(), &p)
	if len(p.p) < 2 {
		t.Errorf("%d datagrams for 200 queues", len(p.p))
	}
	for _, pk := range p.p {
		if len(pk) > maxPacket {
			t.Errorf("datagram of %d bytes", len(pk))
		}
	}
}

func TestStatsDStopSendsUDP(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	stats := NewStats(StatsOptions{})
	o := New(coreOf(newFakeCore()), stats, Options{})
	stats.Pushed("u", 1)
	sd := o.NewStatsD(pc.LocalAddr().String(), time.Hour)
	if err := sd.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	sd.Stop() // the final flush sends what was counted
	_ = pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	n, _, err := pc.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(buf[:n]); got != "lmq.u.push:1|c" {
		t.Errorf("datagram %q", got)
	}
}

func TestStatusClientAndPrint(t *testing.T) {
	core := newFakeCore(gateway.QueueInfo{Name: "q1", Size: 3, Bytes: 300, Props: props()})
	o := New(coreOf(core), NewStats(StatsOptions{}), Options{
		Auth: auth.Credential{BearerToken: "tok"},
		Nodes: func(context.Context) (Nodes, error) {
			return Nodes{Active: []string{"n1"}, All: []string{"n1", "n2"}}, nil
		},
	})
	srv := httptest.NewServer(handler(o, nil))
	defer srv.Close()
	if _, err := (StatusClient{Base: srv.URL}).Fetch(t.Context(), false); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("without the token: %v", err)
	}
	doc, err := StatusClient{Base: strings.TrimPrefix(srv.URL, "http://"), Auth: auth.Credential{BearerToken: "tok"}}.Fetch(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := PrintStatus(&out, doc); err != nil {
		t.Fatal(err)
	}
	want := "Active nodes: n1\n" +
		"All nodes:    n1, n2\n" +
		"Down:         n2\n" +
		"\n" +
		"QUEUE  MESSAGES  BYTES  PROPERTIES\n" +
		`q1     3         300    {"accum":0,"retry":2,"timeout":30}` + "\n"
	if out.String() != want {
		t.Errorf("status output:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	_ = PrintStatus(&out, &StatsDoc{})
	if !strings.Contains(out.String(), "No queues.") {
		t.Errorf("no queues: %q", out.String())
	}
}

func TestBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		":9980":                "http://localhost:9980",
		"0.0.0.0:9980":         "http://localhost:9980",
		"127.0.0.1:1":          "http://127.0.0.1:1",
		"[::1]:9980":           "http://[::1]:9980",
		"https://gw:9980/":     "https://gw:9980",
		"gw.example.org:9980":  "http://gw.example.org:9980",
		"http://10.0.0.1:9980": "http://10.0.0.1:9980",
	} {
		if got := BaseURL(in); got != want {
			t.Errorf("BaseURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadyWithoutJetStream(t *testing.T) {
	core := newFakeCore()
	o := New(coreOf(core), NewStats(StatsOptions{}), Options{})
	if err := o.Ready(t.Context()); err == nil {
		t.Error("ready without JetStream")
	}
	o.Drain()
	if err := o.Ready(t.Context()); !errors.Is(err, ErrDraining) {
		t.Errorf("draining: %v", err)
	}
	if w := get(t, handler(o, nil), "/readyz"); w.Code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while draining: %d", w.Code)
	}
}

// TestRPCListenerPeerClosed: the counting wrapper lets internal/clientgone
// see a client that has closed its socket (the RPC front end asks before
// writing a delivery).
func TestRPCListenerPeerClosed(t *testing.T) {
	o := New(coreOf(newFakeCore()), NewStats(StatsOptions{}), Options{})
	wl := listenRPC(t, o)
	c, s := testnet.Accept(t, wl)
	if clientgone.Closed(s) {
		t.Fatal("open connection reported closed")
	}
	c.Close()
	testwait.For(t, "the closed client seen through the counting wrapper", func() bool { return clientgone.Closed(s) })
}

// coreOf is the Core of a real gateway's handles, or one with a fake core
// in every field.
func coreOf(c any) Core {
	if g, ok := c.(*gateway.Gateway); ok {
		return CoreOf(g)
	}
	f := c.(*fakeCore)
	return Core{Queues: f, Inspect: f, Gateway: f}
}
