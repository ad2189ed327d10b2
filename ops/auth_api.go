package ops

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/httpapi/route"
)

// The token endpoints (mounted with Options.Tokens; admin on every queue).
const (
	PathTokens = "/tokens"
	// maxTokenSpec bounds a POST /tokens body.
	maxTokenSpec = 64 << 10
)

// CreatedToken is POST /tokens's answer: the token (shown this once) and
// what it is.
type CreatedToken struct {
	Token string `json:"token"`
	gateway.TokenInfo
}

// TokenList is GET /tokens's answer.
type TokenList struct {
	Tokens []gateway.TokenInfo `json:"tokens"`
}

func (o *Ops) mountTokens(t *route.Table) {
	// A token that may manage tokens may give itself any right: admin on
	// every queue.
	manage := route.OnAll(gateway.RightAdmin)
	t.HandleFunc(PathTokens, manage, o.createToken, http.MethodPost)
	t.HandleFunc(PathTokens, manage, o.listTokens, http.MethodGet, http.MethodHead)
	t.HandleFunc(PathTokens+"/{id}", manage, o.getToken, http.MethodGet, http.MethodHead)
	t.HandleFunc(PathTokens+"/{id}", manage, o.revokeToken, http.MethodDelete)
}

func (o *Ops) createToken(w http.ResponseWriter, r *http.Request) {
	if !RequireJSON(w, r) {
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxTokenSpec+1))
	if err != nil {
		if r.Context().Err() == nil {
			writeJSONError(w, http.StatusBadRequest, "reading body: "+err.Error())
		}
		return
	}
	if len(body) > maxTokenSpec {
		writeJSONError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", maxTokenSpec))
		return
	}
	var spec gateway.TokenSpec
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		writeJSONError(w, http.StatusBadRequest, "token spec: "+err.Error())
		return
	}
	if dec.More() {
		writeJSONError(w, http.StatusBadRequest, "token spec: trailing data after the JSON object")
		return
	}
	tok, info, err := o.opt.Tokens.CreateToken(r.Context(), spec)
	if err != nil {
		o.tokenError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, CreatedToken{Token: tok, TokenInfo: info})
}

func (o *Ops) listTokens(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, TokenList{Tokens: o.opt.Tokens.ListTokens(r.Context())})
}

func (o *Ops) getToken(w http.ResponseWriter, r *http.Request) {
	info, ok := o.opt.Tokens.Token(route.Var(r, "id"))
	if !ok {
		writeJSONError(w, http.StatusNotFound, "no such token")
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (o *Ops) revokeToken(w http.ResponseWriter, r *http.Request) {
	if err := o.opt.Tokens.RevokeToken(r.Context(), route.Var(r, "id")); err != nil {
		o.tokenError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (o *Ops) tokenError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, gateway.ErrInvalid):
		writeJSONError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, gateway.ErrNotFound):
		writeJSONError(w, http.StatusNotFound, "no such token")
	case r.Context().Err() != nil:
		// The client left: nobody reads an answer.
	default:
		o.log.Warn("tokens", "err", err)
		writeJSONError(w, http.StatusServiceUnavailable, err.Error())
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
