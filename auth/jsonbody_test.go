package auth

import (
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
