package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/auth"
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

// TestMoveWaitingMessage: POST /queues/{name}/messages/{id}/move?to= moves
// one waiting message (204) to the end of the target queue; then 404; a
// missing target or a bad id is a 400.
func TestMoveWaitingMessage(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	s.do("POST", "/messages/m%2Fq", "one").want(t, "push", 200, "*")
	s.do("POST", "/messages/m%2Fq", "two").want(t, "push", 200, "*")
	s.do("POST", "/queues/m%2Fq/messages/1/move", "").wantError(t, "no target", 400, "?to=")
	s.do("POST", "/queues/m%2Fq/messages/0/move?to=m%2Ft", "").wantError(t, "id 0", 400, "positive integer")
	s.do("POST", "/queues/m%2Fq/messages/1/move?to=m%2Ft", "").want(t, "move", 204, "")
	s.do("POST", "/queues/m%2Fq/messages/2/move?to=m%2Ft", "").wantError(t, "move gone", 404, "not found")
	s.do("POST", "/queues/none/messages/1/move?to=m%2Ft", "").wantError(t, "no queue", 404, "not found")
	s.do("GET", "/queues/m%2Ft/messages?body=1", "").want(t, "target", 200,
		`[{"id":1,"priority":0,"content_type":"application/octet-stream","delivered":0,"size":3,"object":false,"compound":false,"body":"b25l"}]`)
	s.do("GET", "/messages/m%2Fq", "").want(t, "pull the other", 200, "two")
	s.do("GET", "/queues/m%2Fq/messages/1/move?to=x", "").wantError(t, "wrong method", 405, "method not allowed")
}

// TestMoveMessageScope: moving a message needs admin on the target queue
// too.
func TestMoveMessageScope(t *testing.T) {
	t.Parallel()
	api := startFullAPI(t)
	ctx := context.Background()
	adminA, _, err := api.tokens.CreateToken(ctx, auth.TokenSpec{Name: "aa", Prefix: "a", Rights: []string{"admin", "push", "pull"}})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, tok string) (int, string) {
		req, _ := http.NewRequest(method, api.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := api.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := do("POST", "/messages/a1", adminA); st != 200 {
		t.Fatalf("push: %d %s", st, body)
	}
	if st, body := do("POST", "/queues/a1/messages/1/move?to=b1", adminA); st != 403 || !strings.Contains(body, `on the target queue \"b1\"`) {
		t.Errorf("move out of scope: %d %s, want 403", st, body)
	}
	if st, body := do("POST", "/queues/b1/messages/1/move?to=a2", adminA); st != 403 {
		t.Errorf("move from out of scope: %d %s, want 403", st, body)
	}
	_, list := do("GET", "/queues/a1/messages", adminA)
	var ms []struct{ ID uint64 }
	if err := json.Unmarshal([]byte(list), &ms); err != nil || len(ms) != 1 {
		t.Fatalf("list: %s %v", list, err)
	}
	if st, body := do("POST", fmt.Sprintf("/queues/a1/messages/%d/move?to=a2", ms[0].ID), adminA); st != 204 {
		t.Errorf("move in scope: %d %s, want 204", st, body)
	}
}
