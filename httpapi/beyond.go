package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/mapping"
)

// The features beyond LMQ: query parameters and endpoints LMQ did not have,
// so nothing an LMQ client sends reaches them.

func (a *api) mountBeyond(r *mux.Router) {
	r.Handle("/queues", a.handler(a.listQueues)).Methods(http.MethodGet)
	r.Handle("/queues/{name}", a.named(a.queueDetail)).Methods(http.MethodGet)
	r.Handle("/queues/{name}/dead", a.named(a.deadInfo)).Methods(http.MethodGet)
	r.Handle("/queues/{name}/dead", a.named(a.deleteDead)).Methods(http.MethodDelete)
	r.Handle("/queues/{name}/dead/head", a.named(a.deadHead)).Methods(http.MethodGet)
	r.Handle("/queues/{name}/dead/respawn", a.named(a.respawnDead)).Methods(http.MethodPost)
}

// seconds reads an optional seconds query parameter, from 0 to
// mapping.MaxSeconds.
func seconds(r *http.Request, key string) (time.Duration, error) {
	v := query(r).Get(key)
	if v == "" {
		return 0, nil
	}
	d, err := mapping.ParseSeconds(key, v)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", gateway.ErrInvalid, err)
	}
	return d, nil
}

// pushOptions reads ?delay= and ?ttl=.
func pushOptions(r *http.Request) (gateway.PushOptions, error) {
	var o gateway.PushOptions
	var err error
	if o.Delay, err = seconds(r, "delay"); err != nil {
		return o, err
	}
	if o.TTL, err = seconds(r, "ttl"); err != nil {
		return o, err
	}
	// Beyond LMQ: a retried push with the same key is stored once
	// (gateway.IdempotencyWindow).
	o.IdempotencyKey = r.Header.Get("Idempotency-Key")
	return o, nil
}

// pushBatch stores the messages of a ?batch=1 body atomically: a
// multipart/mixed body (one message per part, with its content-type) or an
// application/x-msgpack array of [{header: value}, content] pairs (the form of
// a compound message).
func (a *api) pushBatch(w http.ResponseWriter, r *http.Request, queue string) error {
	body, err := a.readBody(w, r)
	if err != nil {
		return err
	}
	msgs, err := parseBatch(r.Header.Get("Content-Type"), body)
	if err != nil {
		return err
	}
	if err := a.core.PushBatch(r.Context(), queue, msgs); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, []byte(`{"accum":"no","count":`+strconv.Itoa(len(msgs))+`}`))
	return nil
}

// parseBatch reads a batch body. Its memory follows the body: the MessagePack
// reader checks every declared count against the bytes present, and parts are
// counted as they are read, so a body with more than gateway.MaxBatch
// messages is refused at the first one too many. A batch that holds no
// message (also a multipart body whose boundary never occurs) is refused.
func parseBatch(contentType string, body []byte) ([]gateway.Message, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, fmt.Errorf("%w: batch content-type: %w", gateway.ErrInvalid, err)
	}
	var msgs []gateway.Message
	switch {
	case mt == mapping.ContentTypeMsgpack:
		if msgs, err = gateway.DecodeCompound(body, gateway.MaxBatch); err != nil {
			return nil, fmt.Errorf("%w: batch body: %w", gateway.ErrInvalid, err)
		}
		if len(msgs) == 0 {
			return nil, fmt.Errorf("%w: batch body holds no message", gateway.ErrInvalid)
		}
		return msgs, nil
	case strings.HasPrefix(mt, "multipart/"):
		boundary := params["boundary"]
		if boundary == "" {
			return nil, fmt.Errorf("%w: batch content-type %s has no boundary", gateway.ErrInvalid, mt)
		}
		mr := multipart.NewReader(bytes.NewReader(body), boundary)
		for {
			p, err := mr.NextRawPart()
			// Only the closing boundary ends the parts with a bare io.EOF; a
			// body cut before it gives a wrapped one, and is refused.
			if err == io.EOF { //nolint:errorlint // see above
				break
			}
			if errors.Is(err, io.EOF) {
				if len(msgs) == 0 {
					return nil, fmt.Errorf("%w: batch body: no part; the boundary of the content-type does not occur in it", gateway.ErrInvalid)
				}
				return nil, fmt.Errorf("%w: batch body ends after part %d without the closing boundary", gateway.ErrInvalid, len(msgs))
			}
			if err != nil {
				return nil, fmt.Errorf("%w: batch body: part %d: %w", gateway.ErrInvalid, len(msgs)+1, err)
			}
			if len(msgs) == gateway.MaxBatch {
				return nil, fmt.Errorf("%w: a batch holds at most %d messages", gateway.ErrInvalid, gateway.MaxBatch)
			}
			b, err := io.ReadAll(p)
			if err != nil {
				return nil, fmt.Errorf("%w: batch body: part %d: %w", gateway.ErrInvalid, len(msgs)+1, err)
			}
			msgs = append(msgs, gateway.Message{ContentType: p.Header.Get("Content-Type"), Body: b})
		}
		if len(msgs) == 0 {
			return nil, fmt.Errorf("%w: batch body holds no message", gateway.ErrInvalid)
		}
		return msgs, nil
	}
	return nil, fmt.Errorf("%w: a batch is multipart/mixed or %s", gateway.ErrInvalid, mapping.ContentTypeMsgpack)
}

// queueSummary is one entry of GET /queues. A queue whose stream does not
// answer (offline or electing a leader in a cluster) is listed with size null
// and the error, rather than failing the whole list.
type queueSummary struct {
	Name  string  `json:"name"`
	Size  *uint64 `json:"size"`
	Error string  `json:"error,omitempty"`
}

func (a *api) listQueues(w http.ResponseWriter, r *http.Request) error {
	out := []queueSummary{}
	for _, name := range a.core.QueueNames() {
		qi, err := a.core.Queue(r.Context(), name)
		if errors.Is(err, gateway.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			out = append(out, queueSummary{Name: name, Error: err.Error()})
			continue
		}
		out = append(out, queueSummary{Name: name, Size: &qi.Size})
	}
	b, _ := json.Marshal(map[string]any{"queues": out})
	writeJSON(w, http.StatusOK, b)
	return nil
}

func (a *api) queueDetail(w http.ResponseWriter, r *http.Request, queue string) error {
	d, err := a.core.QueueDetail(r.Context(), queue)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(map[string]any{
		"name":         d.Name,
		"size":         d.Size,
		"in_flight":    d.InFlight,
		"delayed":      d.Delayed,
		"dead_letters": d.DeadLetters,
		"accumulating": d.Parts,
		"bytes":        d.Bytes,
		"props":        json.RawMessage(d.Props.JSON()),
	})
	writeJSON(w, http.StatusOK, b)
	return nil
}

func (a *api) deadInfo(w http.ResponseWriter, r *http.Request, queue string) error {
	d, err := a.core.QueueDetail(r.Context(), queue)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, []byte(`{"size":`+strconv.FormatUint(d.DeadLetters, 10)+`}`))
	return nil
}

// deadHead shows the oldest dead letter like a delivered message, with its
// history in x-lmq-deliveries and x-lmq-dead-at; 204 when there is none.
func (a *api) deadHead(w http.ResponseWriter, r *http.Request, queue string) error {
	dl, err := a.core.DeadLetterHead(r.Context(), queue)
	if err != nil {
		return err
	}
	if dl == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	h := w.Header()
	h[hdrQueueName] = []string{queue}
	h["x-lmq-deliveries"] = []string{strconv.Itoa(dl.Deliveries)}
	h["x-lmq-dead-at"] = []string{dl.DiedAt.UTC().Format(time.RFC3339Nano)}
	for _, k := range dl.Message.Kept {
		h[k.Name] = append(h[k.Name], k.Value)
	}
	h.Set("Content-Type", contentTypeOf(dl.Message))
	h.Set("Content-Length", strconv.Itoa(len(dl.Message.Body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(dl.Message.Body)
	return nil
}

func (a *api) respawnDead(w http.ResponseWriter, r *http.Request, queue string) error {
	n := 1
	if v := query(r).Get("n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			return fmt.Errorf("%w: n must be a positive integer", gateway.ErrInvalid)
		}
	}
	moved, err := a.core.RespawnDeadLetters(r.Context(), queue, n)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, []byte(`{"respawned":`+strconv.Itoa(moved)+`}`))
	return nil
}

func (a *api) deleteDead(w http.ResponseWriter, r *http.Request, queue string) error {
	n, err := a.core.DeleteDeadLetters(r.Context(), queue)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, []byte(`{"deleted":`+strconv.FormatUint(n, 10)+`}`))
	return nil
}
