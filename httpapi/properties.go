package httpapi

import (
	"fmt"
	"mime"
	"net/http"
	"strconv"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// LMQ's properties: /properties (the default-properties list) and
// /properties/{name} (a queue's), also under the older /props.

func (a *api) getDefaults(w http.ResponseWriter, r *http.Request) error {
	l, err := a.core.Queues.DefaultProps(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, l.JSON())
	return nil
}

// jsonBody reads a JSON request body; other content types are 415.
func (a *api) jsonBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return nil, &statusError{http.StatusUnsupportedMediaType, "content-type must be application/json"}
	}
	return a.readBody(w, r)
}

func (a *api) putDefaults(w http.ResponseWriter, r *http.Request) error {
	body, err := a.jsonBody(w, r)
	if err != nil {
		return err
	}
	l, err := mapping.ParseDefaultList(body)
	if err != nil {
		return fmt.Errorf("%w: %w", gateway.ErrInvalid, err)
	}
	return noContent(w, a.core.Queues.SetDefaultProps(r.Context(), l))
}

func (a *api) deleteDefaults(w http.ResponseWriter, r *http.Request) error {
	return noContent(w, a.core.Queues.SetDefaultProps(r.Context(), nil))
}

func (a *api) getProps(w http.ResponseWriter, r *http.Request, queue string) error {
	p, err := a.core.Queues.QueueProps(r.Context(), queue)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p.JSON())
	return nil
}

func (a *api) patchProps(w http.ResponseWriter, r *http.Request, queue string) error {
	body, err := a.jsonBody(w, r)
	if err != nil {
		return err
	}
	p, err := mapping.ParseProps(body)
	if err != nil {
		return fmt.Errorf("%w: %w", gateway.ErrInvalid, err)
	}
	if t := p.DeadLetterQueue; t != nil && *t != "" && !auth.ScopeOf(r).Allows(*t) {
		// The queue's messages would be pushed there, and the queue made:
		// a token's admin on its own queues must not reach beyond them.
		writeError(w, http.StatusForbidden, "token lacks \"push\" on dead_letter_queue "+strconv.Quote(*t))
		return nil
	}
	return noContent(w, a.core.Queues.UpdateProps(r.Context(), queue, p))
}

func (a *api) deleteProps(w http.ResponseWriter, r *http.Request, queue string) error {
	return noContent(w, a.core.Queues.ResetProps(r.Context(), queue))
}
