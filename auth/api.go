package auth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/jsonreply"
	"github.com/lmq-gateway/lmq-gateway/internal/route"
)

// The token endpoints (admin on every queue).
const (
	PathTokens = "/tokens"
	// maxTokenSpec bounds a POST /tokens body.
	maxTokenSpec = 64 << 10
)

// CreatedToken is POST /tokens's answer: the token (shown this once), the
// AWS credentials it signs SQS requests with (SigV4Credentials: users need
// not derive them), and what it is.
type CreatedToken struct {
	Token              string `json:"token"`
	AWSAccessKeyID     string `json:"aws_access_key_id"`
	AWSSecretAccessKey string `json:"aws_secret_access_key"`
	TokenInfo
}

// TokenList is GET /tokens's answer.
type TokenList struct {
	Tokens []TokenInfo `json:"tokens"`
}

// api serves the token endpoints.
type api struct {
	store *Store
	log   *slog.Logger
}

// Mount declares the endpoints that manage the tokens of store (POST and
// GET /tokens, GET and DELETE /tokens/{id}) on t.
func Mount(t *route.Table, store *Store, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	a := &api{store: store, log: log}
	// A token that may manage tokens may give itself any right: admin on
	// every queue.
	manage := route.OnAll(route.RightAdmin)
	t.HandleFunc(PathTokens, manage, a.create, http.MethodPost)
	t.HandleFunc(PathTokens, manage, a.list, http.MethodGet, http.MethodHead)
	t.HandleFunc(PathTokens+"/{id}", manage, a.get, http.MethodGet, http.MethodHead)
	t.HandleFunc(PathTokens+"/{id}", manage, a.revoke, http.MethodDelete)
}

func (a *api) create(w http.ResponseWriter, r *http.Request) {
	if !RequireJSON(w, r) {
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxTokenSpec+1))
	if err != nil {
		if r.Context().Err() == nil {
			jsonreply.Error(w, http.StatusBadRequest, "reading body: "+err.Error())
		}
		return
	}
	if len(body) > maxTokenSpec {
		jsonreply.Error(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", maxTokenSpec))
		return
	}
	var spec TokenSpec
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		jsonreply.Error(w, http.StatusBadRequest, "token spec: "+err.Error())
		return
	}
	if dec.More() {
		jsonreply.Error(w, http.StatusBadRequest, "token spec: trailing data after the JSON object")
		return
	}
	tok, info, err := a.store.CreateToken(r.Context(), spec)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	keyID, secret, _ := SigV4Credentials(tok)
	jsonreply.Write(w, http.StatusCreated, CreatedToken{Token: tok, AWSAccessKeyID: keyID, AWSSecretAccessKey: secret, TokenInfo: info})
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	jsonreply.Write(w, http.StatusOK, TokenList{Tokens: a.store.ListTokens(r.Context())})
}

func (a *api) get(w http.ResponseWriter, r *http.Request) {
	info, ok := a.store.Token(route.Var(r, "id"))
	if !ok {
		jsonreply.Error(w, http.StatusNotFound, "no such token")
		return
	}
	jsonreply.Write(w, http.StatusOK, info)
}

func (a *api) revoke(w http.ResponseWriter, r *http.Request) {
	if err := a.store.RevokeToken(r.Context(), route.Var(r, "id")); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	kind := gateway.KindOf(err)
	switch {
	case kind == gateway.KindInvalid:
		jsonreply.Error(w, http.StatusBadRequest, err.Error())
	case kind == gateway.KindNotFound:
		jsonreply.Error(w, http.StatusNotFound, "no such token")
	case r.Context().Err() != nil:
		// The client left: nobody reads an answer.
	default:
		a.log.Warn("tokens", "err", err)
		jsonreply.Error(w, http.StatusServiceUnavailable, err.Error())
	}
}
