package ops

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/auth"
)

// TestReadyWhileStoreFull: a store that refuses writes for want of
// storage (a full disk, JetStream's limit) while JetStream answers leaves
// the gateway ready (it serves the pulls, acks, deletions and purges that
// free space: a load balancer must not cut them off); /readyz?verbose and
// lmq_store_failing say the store is full, the cause only to a request
// with credentials when authentication is on.
func TestReadyWhileStoreFull(t *testing.T) {
	core := newFakeCore()
	core.probeOK = true
	o := New(coreOf(core), NewStats(StatsOptions{}), Options{})
	h := handler(o, nil)
	core.mu.Lock()
	core.storeErr = errors.New("write error: no space left on device")
	core.mu.Unlock()
	if w := get(t, h, "/readyz"); w.Code != http.StatusOK {
		t.Errorf("/readyz with a full store: %d %q, want 200", w.Code, w.Body.String())
	}
	w := get(t, h, "/readyz?verbose")
	if body := w.Body.String(); w.Code != http.StatusOK || !strings.Contains(body, "store: full: writes refused") || !strings.Contains(body, "no space left") {
		t.Errorf("/readyz?verbose with a full store: %d %q", w.Code, body)
	}
	if body := get(t, h, "/metrics").Body.String(); !strings.Contains(body, "lmq_store_failing 1") {
		t.Errorf("/metrics lacks lmq_store_failing 1")
	}

	// With authentication, the cause is the API's business.
	oa := New(coreOf(core), NewStats(StatsOptions{}), Options{Auth: auth.Credential{BearerToken: "s3cret"}})
	ha := handler(oa, nil)
	if body := get(t, ha, "/readyz?verbose").Body.String(); !strings.Contains(body, "store: full: writes refused") || strings.Contains(body, "no space left") {
		t.Errorf("/readyz?verbose without credentials: %q", body)
	}
	if body := get(t, ha, "/readyz?verbose", "Authorization", "Bearer s3cret").Body.String(); !strings.Contains(body, "no space left") {
		t.Errorf("/readyz?verbose with credentials lacks the cause: %q", body)
	}

	core.mu.Lock()
	core.storeErr = nil
	core.mu.Unlock()
	if w := get(t, h, "/readyz?verbose"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "store: ok\n") {
		t.Errorf("/readyz?verbose after the store recovered: %d %q", w.Code, w.Body.String())
	}
	if body := get(t, h, "/metrics").Body.String(); !strings.Contains(body, "lmq_store_failing 0") {
		t.Errorf("/metrics lacks lmq_store_failing 0")
	}

	// JetStream not answering still makes the gateway unready.
	core.mu.Lock()
	core.probeOK = false
	core.mu.Unlock()
	o = New(coreOf(core), NewStats(StatsOptions{}), Options{})
	if w := get(t, handler(o, nil), "/readyz"); w.Code != http.StatusServiceUnavailable {
		t.Errorf("/readyz without JetStream: %d, want 503", w.Code)
	}
}
