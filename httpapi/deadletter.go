package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/lmq-gateway/lmq-gateway/gateway"
)

// Dead letters (beyond LMQ): /queues/{name}/dead, its head, respawn and
// delete.

func (a *api) deadInfo(w http.ResponseWriter, r *http.Request, queue string) error {
	d, err := a.core.Inspect.QueueDetail(r.Context(), queue)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, []byte(`{"size":`+strconv.FormatUint(d.DeadLetters, 10)+`}`))
	return nil
}

// deadHead shows the oldest dead letter like a delivered message, with its
// history in x-lmq-deliveries and x-lmq-dead-at; 204 when there is none.
func (a *api) deadHead(w http.ResponseWriter, r *http.Request, queue string) error {
	dl, err := a.core.Inspect.DeadLetterHead(r.Context(), queue)
	if err != nil {
		return err
	}
	if dl == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	h := w.Header()
	bodyHeaders(h)
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
	moved, err := a.core.Inspect.RespawnDeadLetters(r.Context(), queue, n)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, []byte(`{"respawned":`+strconv.Itoa(moved)+`}`))
	return nil
}

func (a *api) deleteDead(w http.ResponseWriter, r *http.Request, queue string) error {
	n, err := a.core.Inspect.DeleteDeadLetters(r.Context(), queue)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, []byte(`{"deleted":`+strconv.FormatUint(n, 10)+`}`))
	return nil
}
