package httpapi

import "testing"

// TestPurge: DELETE /queues/{name}/messages answers 204 and empties the
// queue, which stays; an unknown queue is 404, other methods 405.
func TestPurge(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	s.do("POST", "/messages/pq", "x").want(t, "push", 200, "*")
	s.do("DELETE", "/queues/pq/messages", "").want(t, "purge", 204, "")
	s.do("GET", "/messages/pq?t=0", "").want(t, "pull after the purge", 204, "")
	s.do("GET", "/queues/pq", "").want(t, "the queue stays", 200, "*")
	s.do("DELETE", "/queues/none/messages", "").wantError(t, "purge of no queue", 404, "not found")
	s.do("POST", "/queues/pq/messages", "").want(t, "wrong method", 405, "*")
}
