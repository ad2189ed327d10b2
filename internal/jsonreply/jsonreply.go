// Package jsonreply writes the JSON answers of the gateway's management
// endpoints (ops and its token endpoints in auth), so that they all have the
// same headers and the same error shape.
package jsonreply

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Write answers v as JSON with status. The answers describe the gateway's
// state at one moment (statistics, tokens), so they are never cached. A v
// that cannot be encoded is answered 500 with the reason.
func Write(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		Error(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	write(w, status, b)
}

// Error answers {"error": msg} with status, as the queue API's errors read.
func Error(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	write(w, status, b)
}

func write(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
