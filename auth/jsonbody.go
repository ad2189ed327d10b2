package auth

import (
	"mime"
	"net/http"

	"github.com/lmq-gateway/lmq-gateway/internal/jsonreply"
)

// RequireJSON answers 415 and reports false unless r's body is declared
// application/json (parameters such as charset allowed). The endpoints that
// take a JSON body and act for the operator (POST /tokens, the console's
// POST /ui/api/match) require it even though their parser would read JSON
// of any declared type: a page of another site can make a browser send
// text/plain, form-encoded or multipart bodies with its saved credentials
// without asking (a plain form), but application/json only after a CORS
// preflight that the gateway never grants. So this holds where the
// cross-origin check (httpapi's) cannot tell: a browser too old to send
// Sec-Fetch-Site or Origin.
func RequireJSON(w http.ResponseWriter, r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil && mt == "application/json" {
		return true
	}
	jsonreply.Error(w, http.StatusUnsupportedMediaType, "content-type must be application/json")
	return false
}
