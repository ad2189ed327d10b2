package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// queryProbe runs raw through strictQuery and then through every parameter
// reader of the API, as a routed request would; it reports the status
// strictQuery answered (0 when it let the request through) and the readers'
// results.
func queryProbe(t *testing.T, raw string) (status int) {
	t.Helper()
	a := &api{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h := a.strictQuery(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wait, cf, err := pullParams(r)
		if err == nil {
			if wait != -1 && (wait < 0 || wait > mapping.MaxDuration) {
				t.Fatalf("query %q: wait %v out of range", raw, wait)
			}
			if cf != "multipart" && cf != "msgpack" {
				t.Fatalf("query %q: cf %q", raw, cf)
			}
		}
		o, err := pushOptions(r)
		if err == nil && (o.Delay < 0 || o.Delay > mapping.MaxDuration || o.TTL < 0 || o.TTL > mapping.MaxDuration ||
			o.Priority != nil && (*o.Priority < 0 || *o.Priority > mapping.MaxPriority)) {
			t.Fatalf("query %q: push options %+v out of range", raw, o)
		}
		_, _ = qre(r)
		w.WriteHeader(http.StatusTeapot)
	}))
	r := httptest.NewRequest(http.MethodGet, "/messages/q", nil)
	r.URL.RawQuery = raw
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code == http.StatusTeapot {
		return 0
	}
	return w.Code
}

func TestStrictQueryRefuses(t *testing.T) {
	for _, raw := range []string{"t=%zz", "t=0;x=1", "delay=3600;x=1", "%", "a=%4", strings.Repeat("a=1&", 10_001)} {
		if st := queryProbe(t, raw); st != http.StatusBadRequest {
			t.Errorf("query %.40q: status %d, want 400", raw, st)
		}
	}
	for _, raw := range []string{"", "t=0", "t=1.5&cf=msgpack", "unknown=1", "qre=a%2Bb", strings.Repeat("a=1&", 9_999) + "a=1"} {
		if st := queryProbe(t, raw); st != 0 {
			t.Errorf("query %.40q: status %d, want passed through", raw, st)
		}
	}
}

// FuzzQuery: any query string is either refused whole with 400 (when it does
// not parse) or read into values in their documented ranges; nothing panics.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{
		"t=%zz", "t=0;x=1", "delay=3600;x=1", "t=1e300", "t=-1", "t=NaN", "t=Inf",
		"delay=9000000000", "ttl=9000000000", "ttl=1e10", "t=315360000", "cf=msgpack&t=0.25",
		"qre=(a*)*b", "qre=%28", "t=0x10", "t=1_000", "t=+5", "t=.5", "t=5.",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		st := queryProbe(t, raw)
		_, perr := url.ParseQuery(raw)
		switch {
		case perr != nil && st != http.StatusBadRequest:
			t.Fatalf("query %q does not parse (%v) but was answered %d", raw, perr, st)
		case perr == nil && st != 0:
			t.Fatalf("query %q parses but was refused with %d", raw, st)
		}
	})
}

func TestPushPriority(t *testing.T) {
	for raw, want := range map[string]int{"priority=0": 0, "priority=9": 9, "priority=3&ttl=1": 3} {
		r := httptest.NewRequest(http.MethodPost, "/messages/q?"+raw, nil)
		o, err := pushOptions(r)
		if err != nil || o.Priority == nil || *o.Priority != want {
			t.Errorf("%s: %v %v", raw, o.Priority, err)
		}
	}
	for _, raw := range []string{"", "priority="} {
		r := httptest.NewRequest(http.MethodPost, "/messages/q?"+raw, nil)
		if o, err := pushOptions(r); err != nil || o.Priority != nil {
			t.Errorf("%q: %v %v, want the queue's default", raw, o.Priority, err)
		}
	}
	for _, raw := range []string{"priority=10", "priority=-1", "priority=x", "priority=1.0", "priority=%2B1"} {
		r := httptest.NewRequest(http.MethodPost, "/messages/q?"+raw, nil)
		if _, err := pushOptions(r); err == nil {
			t.Errorf("%s accepted", raw)
		}
	}
}
