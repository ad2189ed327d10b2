package httpapi

import "net/http"

// purge serves DELETE /queues/{name}/messages (beyond LMQ): every waiting
// message of the queue is removed; the queue, its properties and its dead
// letters stay. 204; 404 for an unknown queue.
func (a *api) purge(w http.ResponseWriter, r *http.Request, queue string) error {
	return noContent(w, a.core.Queues.Purge(r.Context(), queue))
}
