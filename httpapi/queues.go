package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/lmq-gateway/lmq-gateway/auth"
)

// The queue inventory (beyond LMQ): GET /queues and GET /queues/{name}.

// queueSummary is one entry of GET /queues. A queue whose stream does not
// answer (offline or electing a leader in a cluster) is listed with size null
// and the error, rather than failing the whole list.
type queueSummary struct {
	Name  string  `json:"name"`
	Size  *uint64 `json:"size"`
	Error string  `json:"error,omitempty"`
}

func (a *api) listQueues(w http.ResponseWriter, r *http.Request) error {
	all, err := a.core.Inspect.QueueStatuses(r.Context(), auth.ScopeOf(r))
	if err != nil {
		return err
	}
	out := make([]queueSummary, 0, len(all))
	for i := range all {
		qs := &all[i]
		if qs.Err != nil {
			out = append(out, queueSummary{Name: qs.Name, Error: qs.Err.Error()})
			continue
		}
		out = append(out, queueSummary{Name: qs.Name, Size: &qs.Size})
	}
	b, _ := json.Marshal(map[string]any{"queues": out})
	writeJSON(w, http.StatusOK, b)
	return nil
}

func (a *api) queueDetail(w http.ResponseWriter, r *http.Request, queue string) error {
	d, err := a.core.Inspect.QueueDetail(r.Context(), queue)
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
