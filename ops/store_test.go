package ops

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// TestReadyStoreFailure: a standing store failure (a full disk) makes
// /readyz answer 503 with the reason, without the JetStream probe's cache in
// the way, and readiness comes back with the store.
func TestReadyStoreFailure(t *testing.T) {
	core := newFakeCore()
	o := New(core, NewStats(StatsOptions{}), Options{})
	h := handler(o, nil)
	core.mu.Lock()
	core.storeErr = errors.New("write error: no space left on device")
	core.mu.Unlock()
	w := get(t, h, "/readyz")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "no space left") {
		t.Fatalf("/readyz with a store failure: %d %q", w.Code, w.Body.String())
	}
	if body := get(t, h, "/metrics").Body.String(); !strings.Contains(body, "lmq_store_failing 1") {
		t.Errorf("/metrics lacks lmq_store_failing 1")
	}
	core.mu.Lock()
	core.storeErr = nil
	core.mu.Unlock()
	// The fake has no JetStream: readiness now fails on the probe, not on
	// the store.
	if err := o.Ready(t.Context()); err == nil || strings.Contains(err.Error(), "store failing") {
		t.Errorf("ready after the store recovered: %v", err)
	}
	if body := get(t, h, "/metrics").Body.String(); !strings.Contains(body, "lmq_store_failing 0") {
		t.Errorf("/metrics lacks lmq_store_failing 0")
	}
}
