package console

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/mapping"
	"github.com/lmq-gateway/lmq-gateway/ops"
)

// TestQueueControlInConsole: the queue list's rows carry paused, and the
// page has what queue control needs: the pause/resume and purge buttons
// (calling the HTTP API), the paused mark, and the paused and max_inflight
// fields of the properties form. (The browser test, e2e/console_test.go,
// clicks through the rest of the page.)
func TestQueueControlInConsole(t *testing.T) {
	row := rowOf(&ops.QueueView{})
	b, _ := json.Marshal(row)
	if !strings.Contains(string(b), `"paused":false`) {
		t.Errorf("row %s lacks paused", b)
	}
	v := ops.QueueView{}
	v.Name, v.Props = "held", mapping.Effective{Paused: true}
	if !rowOf(&v).Paused {
		t.Error("a paused queue's row is not paused")
	}

	js, err := assetsFS.ReadFile("assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`id: 'queue-pause'`, `id: 'queue-purge'`, `id: 'paused-badge'`, `'data-paused'`,
		`['paused', 'Paused', 'bool']`, `['max_inflight', `,
		`api('DELETE', '/queues/' + qp + '/messages')`, `api('PATCH', '/props/' + qp, { paused })`,
	} {
		if !strings.Contains(string(js), want) {
			t.Errorf("app.js lacks %s", want)
		}
	}
}
