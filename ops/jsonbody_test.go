package ops

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRequireJSON(t *testing.T) {
	t.Parallel()
	for ct, ok := range map[string]bool{
		"application/json":                  true,
		"application/json; charset=utf-8":   true,
		"Application/JSON":                  true,
		"":                                  false,
		"text/plain":                        false,
		"application/x-www-form-urlencoded": false,
		"multipart/form-data; boundary=b":   false,
		"application/jsonx":                 false,
		"application/json; =":               false,
	} {
		req := httptest.NewRequest(http.MethodPost, "/tokens", strings.NewReader("{}"))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		w := httptest.NewRecorder()
		if got := RequireJSON(w, req); got != ok {
			t.Errorf("%q: %v, want %v", ct, got, ok)
		}
		if !ok && (w.Code != http.StatusUnsupportedMediaType || w.Body.String() != `{"error":"content-type must be application/json"}`) {
			t.Errorf("%q: %d %s, want 415", ct, w.Code, w.Body)
		}
	}
}

// TestCreateTokenWantsJSON: POST /tokens creates nothing from a body a
// plain form of another site could send (text/plain), even with the
// operator's credential.
func TestCreateTokenWantsJSON(t *testing.T) {
	h, ts := tokenOps(t)
	spec := `{"name":"n","rights":["admin"]}`
	post := func(ct string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, PathTokens, strings.NewReader(spec))
		req.Header.Set("Authorization", "Bearer op")
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded"} {
		if w := post(ct); w.Code != http.StatusUnsupportedMediaType {
			t.Errorf("POST /tokens %q: %d %s, want 415", ct, w.Code, w.Body)
		}
	}
	if n := len(ts.ListTokens(context.Background())); n != 0 {
		t.Fatalf("%d tokens after refused creations", n)
	}
	if w := post("application/json; charset=utf-8"); w.Code != http.StatusCreated {
		t.Errorf("POST /tokens JSON: %d %s", w.Code, w.Body)
	}
}
