package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/auth"
	"github.com/lmq-gateway/lmq-gateway/gateway"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/fakecore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testcore"
	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
	"github.com/lmq-gateway/lmq-gateway/ops"
)

// scopedAPI is the HTTP API with tokens on (real ones, held by a core on an
// embedded NATS server) over the fake core, for the fuzz targets of queue
// control, and the bearer token of a token scoped to the prefix "a" with
// every right.
func scopedAPI(tb testing.TB) (h http.Handler, core *fakecore.Core, token string) {
	tb.Helper()
	ns := testnats.Start(tb)
	g := testcore.New(tb, testnats.Connect(tb, ns, "httpapi"), gateway.Config{Logger: quiet()})
	ts, err := auth.Open(context.Background(), g, nil)
	if err != nil {
		tb.Fatal(err)
	}
	token, _, err = ts.CreateToken(context.Background(), auth.TokenSpec{Name: "a", Prefix: "a", Rights: []string{"push", "pull", "admin"}})
	if err != nil {
		tb.Fatal(err)
	}
	core = fakecore.New()
	o := ops.New(opsCoreOf(core), ops.NewStats(ops.StatsOptions{}), ops.Options{Logger: quiet(), Tokens: ts, Auth: auth.Credential{BearerToken: "op"}})
	h = New(coreOf(core), Options{Logger: quiet(), Mount: o.Mount, Middleware: o.Middleware,
		Timeouts: Timeouts{BodyIdle: time.Minute, MinRate: 1000, Write: time.Minute}})
	return h, core, token
}

// FuzzMoveMessage: POST /queues/{name}/messages/{id}/move?to= (queue
// control's move target) with any name, id and target, as the operator or
// as a token of the queues starting "a". Never a 5xx; a move (204) had a
// positive id, a target other than the queue, in the token's queues, and
// put one message there; a target outside the token's queues gets nothing
// and the same answer as any other target outside them, existing or not
// (scope before existence, as GetQueueUrl and the SQS redrive checks).
func FuzzMoveMessage(f *testing.F) {
	for _, s := range []struct {
		name, id, to string
		asToken      bool
	}{
		{"a1", "1", "a2", true}, {"a1", "1", "b-exists", true}, {"a1", "1", "b-missing", true},
		{"a1", "0", "a2", true}, {"a1", "-1", "a2", true}, {"a1", "1e3", "a2", true}, {"a1", "99999999999999999999", "a2", true},
		{"a1", "1", "a1", true}, {"a1", "1", "", true}, {"a1", "1", "a\xff", true}, {"a1", "1", "a\x00", false},
		{"b1", "1", "a2", true}, {"a/1", "1", "a%2F2", true}, {"a1", "%31", "a2", false}, {"a1", "1", "\u202ea2", true},
	} {
		f.Add(s.name, s.id, s.to, s.asToken)
	}
	h, core, token := scopedAPI(f)
	core.Put("b-exists", gateway.Message{Body: []byte("there")})
	move := func(name, id, to string, asToken bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/queues/"+url.PathEscape(name)+"/messages/"+url.PathEscape(id)+"/move?to="+url.QueryEscape(to), nil)
		bearer := "op"
		if asToken {
			bearer = token
		}
		r.Header.Set("Authorization", "Bearer "+bearer)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	f.Fuzz(func(t *testing.T, name, id, to string, asToken bool) {
		if core.Size(name) == 0 {
			core.Put(name, gateway.Message{Body: []byte("m")})
		}
		before := core.Size(to)
		w := move(name, id, to, asToken)
		if w.Code >= 500 {
			t.Fatalf("move %q/%q to %q: %d %s", name, id, to, w.Code, w.Body)
		}
		outside := asToken && to != "" && !strings.HasPrefix(to, "a")
		if outside {
			if core.Size(to) != before {
				t.Fatalf("move %q/%q to %q, outside the token's queues: the target changed (%d to %d)", name, id, to, before, core.Size(to))
			}
			for _, other := range []string{"b-exists", "b-missing"} {
				if o := move(name, id, other, true); o.Code != w.Code {
					t.Fatalf("move %q/%q: to %q answers %d, to %q %d", name, id, to, w.Code, other, o.Code)
				}
			}
		}
		if w.Code != http.StatusNoContent {
			return
		}
		seq, err := strconv.ParseUint(id, 10, 64)
		switch {
		case outside:
			t.Fatalf("moved to %q, outside the token's queues", to)
		case err != nil || seq == 0:
			t.Fatalf("moved with the id %q", id)
		case to == "" || to == name:
			t.Fatalf("moved %q to %q", name, to)
		case core.Size(to) != before+1:
			t.Fatalf("moved to %q: %d messages, were %d", to, core.Size(to), before)
		}
	})
}
