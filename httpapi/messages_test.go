package httpapi

import (
	"testing"
)

// TestWaitingMessages: GET /queues/{name}/messages lists the waiting
// messages (bodies, base64, only with body=1); DELETE of one by id answers
// 204, then 404; a bad n, body or id is a 400 naming it.
func TestWaitingMessages(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	s.do("POST", "/messages/w%2Fq", "one", "Content-Type", textPlain).want(t, "push", 200, "*")
	s.do("POST", "/messages/w%2Fq", "two").want(t, "push", 200, "*")
	s.do("GET", "/queues/w%2Fq/messages", "").want(t, "list", 200,
		`[{"id":1,"priority":0,"content_type":"text/plain","delivered":0,"size":3,"object":false,"compound":false},`+
			`{"id":2,"priority":0,"content_type":"application/octet-stream","delivered":0,"size":3,"object":false,"compound":false}]`)
	s.do("GET", "/queues/w%2Fq/messages?n=1&body=1", "").want(t, "list with bodies", 200,
		`[{"id":1,"priority":0,"content_type":"text/plain","delivered":0,"size":3,"object":false,"compound":false,"body":"b25l"}]`)
	for _, n := range []string{"0", "-1", "x", "51", "1e3", "99999999999999999999"} {
		s.do("GET", "/queues/w%2Fq/messages?n="+n, "").wantError(t, "n="+n, 400, "n must be an integer from 1 to 50")
	}
	s.do("GET", "/queues/w%2Fq/messages?body=yes", "").wantError(t, "body=yes", 400, "body must be")
	s.do("GET", "/queues/none/messages", "").wantError(t, "no queue", 404, "not found")

	for _, id := range []string{"0", "-1", "x", "1.5", "%2B1", "18446744073709551616"} {
		s.do("DELETE", "/queues/w%2Fq/messages/"+id, "").wantError(t, "delete id "+id, 400, "positive integer")
	}
	s.do("DELETE", "/queues/w%2Fq/messages/1", "").want(t, "delete", 204, "")
	s.do("DELETE", "/queues/w%2Fq/messages/2", "").wantError(t, "delete gone", 404, "not found")
	s.do("GET", "/queues/w%2Fq/messages?body=true", "").want(t, "list after delete", 200,
		`[{"id":1,"priority":0,"content_type":"application/octet-stream","delivered":0,"size":3,"object":false,"compound":false,"body":"dHdv"}]`)
	s.do("PUT", "/queues/w%2Fq/messages/1", "").wantError(t, "wrong method", 405, "method not allowed")
}
