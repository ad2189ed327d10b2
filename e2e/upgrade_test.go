package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testwait"
	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/upgrade"
)

// The fixture: a data directory written by the gateway of commit 61f8f84
// (one stream per queue); testdata/layout-v1.README.md says how it was made,
// layout-v1.json what it holds, layout-v1.observed.json what that gateway
// answered about its properties and queues.
const (
	layoutV1Archive  = "testdata/layout-v1.tar.gz"
	layoutV1Observed = "testdata/layout-v1.observed.json"
)

// layoutV1Long is the 200-byte queue name of the fixture (hashed then).
var layoutV1Long = "long-" + strings.Repeat("n", 195)

// unpackFixture extracts a .tar.gz into a fresh directory and returns the
// data directory inside it.
func unpackFixture(t *testing.T, archive string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			t.Fatalf("fixture entry %q outside its directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o700)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, 0o600)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "data")
}

// onDataDir prepares (does not start) a gateway with an embedded NATS on an
// existing data directory, logging at info (the upgrade's lines).
func onDataDir(t *testing.T, dataDir string) *Gateway {
	t.Helper()
	g := newGateway(t)
	g.DataDir = dataDir
	g.args = append(g.embeddedArgs("info"), "--access-log=false")
	return g
}

// TestUpgradeLayoutV1 starts this version on a data directory of the old
// layout and accounts for every message and property.
func TestUpgradeLayoutV1(t *testing.T) {
	t.Parallel()
	gw := onDataDir(t, unpackFixture(t, layoutV1Archive))
	gw.start()
	checkLayoutV1(t, gw)
	out := gw.Output()
	if n := strings.Count(out, "upgraded queue"); n != 10 {
		t.Errorf("%d \"upgraded queue\" lines, want 10:\n%s", n, out)
	}
	if !strings.Contains(out, "upgrade from the one-stream-per-queue layout done") {
		t.Errorf("no summary line:\n%s", out)
	}
	// A restart has nothing left to upgrade.
	gw.Restart()
	if n := strings.Count(gw.Output(), "upgraded queue"); n != 10 {
		t.Errorf("the restart upgraded again (%d lines)", n)
	}
}

// TestUpgradeInterrupted kills the gateway in the middle of the upgrade
// (the test hook stops it after a few messages) and starts it again: the
// upgrade finishes and nothing is lost or stored twice.
func TestUpgradeInterrupted(t *testing.T) {
	t.Parallel()
	// The hook is an environment variable of the paused process only (not
	// t.Setenv, which would reach every gateway the parallel tests start).
	for _, after := range []string{"1", "7", "15"} {
		t.Run("after"+after, func(t *testing.T) {
			t.Parallel()
			gw := onDataDir(t, unpackFixture(t, layoutV1Archive))
			launchGateway(gw, append(os.Environ(), upgrade.PauseEnv+"="+after))
			waitOutput(t, gw, "upgrade paused by the test hook")
			gw.Kill()
			gw.start()
			checkLayoutV1(t, gw)
		})
	}
}

// waitOutput polls the gateway's output for a line containing s.
func waitOutput(t *testing.T, gw *Gateway, s string) {
	t.Helper()
	testwait.Within(t, startTimeout, fmt.Sprintf("%q in the output", s), func() bool { return strings.Contains(gw.Output(), s) })
}

// jsonEqual fails unless two JSON texts hold the same value.
func jsonEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v in %s", what, err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: got %s, want %s", what, got, want)
	}
}

// checkLayoutV1 accounts for everything the fixture holds (layout-v1.json).
func checkLayoutV1(t *testing.T, gw *Gateway) {
	t.Helper()
	c := gw.Client(t)
	b, err := os.ReadFile(layoutV1Observed)
	if err != nil {
		t.Fatal(err)
	}
	var obs struct {
		Defaults json.RawMessage            `json:"defaults"`
		Queues   json.RawMessage            `json:"queues"`
		Props    map[string]json.RawMessage `json:"props"`
	}
	if err := json.Unmarshal(b, &obs); err != nil {
		t.Fatal(err)
	}

	// Properties: the default list and every queue's effective set.
	jsonEqual(t, "default list", c.Expect(http.StatusOK, http.MethodGet, "/properties", nil).Body, obs.Defaults)
	for name, want := range obs.Props {
		jsonEqual(t, "properties of "+name, []byte(c.Props(name)), want)
	}

	// The queues and their sizes (acc/open: its window may have closed
	// since the fixture was made, which makes it one message).
	var gotQ, wantQ struct {
		Queues []struct {
			Name string `json:"name"`
			Size int    `json:"size"`
		} `json:"queues"`
	}
	if err := json.Unmarshal(c.Expect(http.StatusOK, http.MethodGet, "/queues", nil).Body, &gotQ); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(obs.Queues, &wantQ); err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int{}
	for _, q := range gotQ.Queues {
		sizes[q.Name] = q.Size
	}
	for _, q := range wantQ.Queues {
		got, ok := sizes[q.Name]
		switch {
		case !ok:
			t.Errorf("queue %q missing after the upgrade", q.Name)
		case q.Name == "acc/open":
		case got != q.Size:
			t.Errorf("queue %q: size %d, want %d", q.Name, got, q.Size)
		}
		delete(sizes, q.Name)
	}
	if len(sizes) > 0 {
		t.Errorf("unexpected queues %v", sizes)
	}

	// Everything else is checked through the new layout's NATS names.
	_, js := natsClient(t, gw)
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	names := js.StreamNames(ctx)
	for s := range names.Name() {
		if strings.HasPrefix(s, mapping.LegacyStreamPrefix) {
			t.Errorf("old stream %s left", s)
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	// The ttl message got its JetStream TTL back.
	st, err := js.Stream(ctx, mapping.StreamName("ttl"))
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.GetLastMsgForSubject(ctx, mapping.QueueSubject("ttl")); err != nil || m.Header.Get("Nats-TTL") == "" {
		t.Errorf("ttl message: %v %v", m, err)
	}
	// The delayed message is a schedule of the new queue subject.
	det := func(name string) map[string]any {
		var d map[string]any
		if err := json.Unmarshal(c.Expect(http.StatusOK, http.MethodGet, "/queues/"+Q(name), nil).Body, &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := det("delayed"); d["delayed"] != 1.0 {
		t.Errorf("delayed: detail %v", d)
	}

	// Messages, in order, with their metadata.
	pull := func(name, body, ct string, retry int, hdr ...string) {
		t.Helper()
		r := c.MustPull(name, msgWait, body)
		if got := r.Header.Get("Content-Type"); got != ct {
			t.Errorf("%q %q: content-type %q, want %q", name, body, got, ct)
		}
		if r.Retry() != retry {
			t.Errorf("%q %q: retry remaining %d, want %d", name, body, r.Retry(), retry)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			if got := r.Header.Get(hdr[i]); got != hdr[i+1] {
				t.Errorf("%q %q: header %s %q, want %q", name, body, hdr[i], got, hdr[i+1])
			}
		}
		c.ExpectReply(http.StatusNoContent, name, r.ID(), "ack")
	}
	// curl sent its default content-type where the fixture gave none.
	const form = "application/x-www-form-urlencoded"
	pull("plain", "nacked-once", "text/plain", 1)
	pull("plain", "first", "text/plain", 2)
	pull("plain", "\x00\x01\x02\xff\xfe binary \x00", "application/octet-stream", 2)
	pull("plain", `{"k":"kept header"}`, "application/json", 2, "X-Trace", "trace-42")
	var big bytes.Buffer
	for i := range 12500 {
		fmt.Fprintf(&big, "%08d", i)
	}
	pull("plain", big.String(), "application/x-big", 2)
	pull("def/one", "def-1", form, 5)
	pull("def/one", "def-2", form, 5)
	pull("sensor/42/temp a b", "21.5 °C", "text/plain; charset=utf-8", 3)
	pull(layoutV1Long, "long-1", form, 4)
	pull(layoutV1Long, "long-2", form, 4)
	pull("delayed", "now", "text/plain", 2)
	pull("ttl", "expires-late", "text/plain", 2)
	pull("dead", "alive", "text/plain", 0)
	compound(t, c, "acc/closed", "part-a", "part-b")

	// The dead letter.
	jsonEqual(t, "dead letters", c.Expect(http.StatusOK, http.MethodGet, "/queues/dead/dead", nil).Body, []byte(`{"size":1}`))
	head := c.Expect(http.StatusOK, http.MethodGet, "/queues/dead/dead/head", nil)
	if string(head.Body) != "died" || head.Header.Get("x-lmq-deliveries") != "1" || head.Header.Get("x-lmq-dead-at") == "" {
		t.Errorf("dead letter: %v", head)
	}

	// The open window's parts: still accumulating, or (its hour is long
	// over) closed into one compound message at the start. Still open, its
	// deadline is brought forward to now (in the accumulator's KV pointer)
	// so that it closes with the parts the upgrade moved.
	if d := det("acc/open"); d["accumulating"] == 2.0 {
		kv, err := js.KeyValue(ctx, mapping.AccumBucket)
		if err != nil {
			t.Fatal(err)
		}
		e, err := kv.Get(ctx, "w."+mapping.EncodeName("acc/open"))
		if err != nil {
			t.Fatal(err)
		}
		var w map[string]json.RawMessage
		if err := json.Unmarshal(e.Value(), &w); err != nil {
			t.Fatal(err)
		}
		w["deadline"] = json.RawMessage(fmt.Sprint(time.Now().UnixNano()))
		b, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Update(ctx, e.Key(), b, e.Revision()); err != nil {
			t.Fatal(err)
		}
	}
	compound(t, c, "acc/open", "open-a", "open-b")

	// Nothing else: every queue is empty now, the delayed message still waits.
	for _, q := range wantQ.Queues {
		c.PullEmpty(q.Name, "0")
	}
	if d := det("delayed"); d["delayed"] != 1.0 {
		t.Errorf("delayed: detail %v", d)
	}
}

// compound pulls one compound message and checks its parts (text/plain).
func compound(t *testing.T, c *Client, name string, parts ...string) {
	t.Helper()
	r := c.Do(http.MethodGet, "/messages/"+Q(name)+"?t="+msgWait+"&cf=msgpack", nil)
	if r.Status != http.StatusOK || r.Header.Get(hType) != "compound" {
		t.Fatalf("%q: %v", name, r)
	}
	var pairs [][]any
	if err := msgpack.Unmarshal(r.Body, &pairs); err != nil {
		t.Fatalf("%q: %v", name, err)
	}
	var got []string
	for _, p := range pairs {
		hdr, _ := p[0].(map[string]any)
		if hdr["content-type"] != "text/plain" {
			t.Errorf("%q part %v: headers %v", name, p[1], hdr)
		}
		b, _ := p[1].([]byte)
		got = append(got, string(b))
	}
	if !reflect.DeepEqual(got, parts) {
		t.Errorf("%q: parts %q, want %q", name, got, parts)
	}
	c.ExpectReply(http.StatusNoContent, name, r.ID(), "ack")
}
