package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/auth"
)

// TestDeliveriesInFlight: GET /queues/{name}/deliveries lists the queue's
// deliveries not yet answered, GET /deliveries/{id} finds one; unknown
// queue or id: 404.
func TestDeliveriesInFlight(t *testing.T) {
	t.Parallel()
	s := startAPI(t, Options{})
	s.do("POST", "/messages/inf", "one").want(t, "push", 200, "*")
	s.do("POST", "/messages/inf", "two").want(t, "push", 200, "*")
	id := s.do("GET", "/messages/inf", "").header.Get("X-Lmq-Message-Id")
	if id == "" {
		t.Fatal("no delivery id")
	}
	a := s.do("GET", "/queues/inf/deliveries", "")
	a.want(t, "list", 200, "*")
	var l []map[string]any
	if err := json.Unmarshal([]byte(a.body), &l); err != nil || len(l) != 1 {
		t.Fatalf("list: %q %v", a.body, err)
	}
	if l[0]["id"] != id || l[0]["queue"] != "inf" || l[0]["client_kind"] != "http" || l[0]["time_left"].(float64) <= 0 ||
		l[0]["receives"] != 1.0 || l[0]["delivered_at"] == nil || l[0]["deadline"] == nil {
		t.Errorf("list: %v", l[0])
	}
	f := s.do("GET", "/deliveries/"+id, "")
	f.want(t, "find", 200, "*")
	if !strings.HasPrefix(f.body, `{"id":"`+id+`","queue":"inf",`) {
		t.Errorf("find: %s", f.body)
	}
	s.do("GET", "/queues/nope/deliveries", "").wantError(t, "unknown queue", 404, "not found")
	s.do("GET", "/deliveries/00000000-0000-4000-8000-000000000999", "").wantError(t, "unknown id", 404, "not found")
	s.do("POST", "/messages/inf/"+id+"?reply=nack", "").want(t, "nack", 204, "")
	s.do("GET", "/queues/inf/deliveries", "").want(t, "list after nack", 200, "[]")
	s.do("GET", "/deliveries/"+id, "").wantError(t, "nacked", 404, "not found")
}

// TestFindDeliveryScope: GET /deliveries/{id} needs admin, and answers a
// token for a delivery of a queue outside its scope as for an unknown one.
func TestFindDeliveryScope(t *testing.T) {
	t.Parallel()
	api := startFullAPI(t)
	ctx := context.Background()
	adminA, _, err := api.tokens.CreateToken(ctx, auth.TokenSpec{Name: "aa", Prefix: "a", Rights: []string{"admin", "push", "pull"}})
	if err != nil {
		t.Fatal(err)
	}
	pullA, _, err := api.tokens.CreateToken(ctx, auth.TokenSpec{Name: "ap", Prefix: "a", Rights: []string{"push", "pull"}})
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, tok string) (int, string, http.Header) {
		req, _ := http.NewRequest(method, api.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := api.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	pull := func(q string) string {
		if st, body, _ := do("POST", "/messages/"+q, "op"); st != 200 {
			t.Fatalf("push %s: %d %s", q, st, body)
		}
		st, body, h := do("GET", "/messages/"+q, "op")
		if st != 200 {
			t.Fatalf("pull %s: %d %s", q, st, body)
		}
		return h.Get("X-Lmq-Message-Id")
	}
	inA, inB := pull("a1"), pull("b1")
	for _, c := range []struct {
		path, tok string
		status    int
	}{
		{"/deliveries/" + inA, "op", 200},
		{"/deliveries/" + inB, "op", 200},
		{"/deliveries/" + inA, adminA, 200},
		{"/deliveries/" + inB, adminA, 404},
		{"/deliveries/" + inA, pullA, 403},
		{"/queues/a1/deliveries", adminA, 200},
		{"/queues/b1/deliveries", adminA, 403},
		{"/queues/a1/deliveries", pullA, 403},
	} {
		if st, body, _ := do("GET", c.path, c.tok); st != c.status {
			t.Errorf("GET %s as %.6s: %d %s, want %d", c.path, c.tok, st, body, c.status)
		}
	}
}
