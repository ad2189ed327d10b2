package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestConsoleQueueControl: on a queue's page, Pause sets the paused
// property (the page and the queue list mark the queue), Resume clears it,
// the form edits max_inflight, and Purge, once confirmed, empties the
// queue and keeps it; the browser logs no error.
func TestConsoleQueueControl(t *testing.T) {
	t.Parallel()
	g, c := StartClient(t)
	b := newBrowser(t, g.HTTP)
	const q = "ctl/jobs"
	for _, m := range []string{"one", "two", "three"} {
		c.Push(q, []byte(m), "text/plain")
	}

	b.open("#/queue/" + Q(q))
	b.waitText(`[data-stat="waiting"]`, "3")
	b.labelled("queue")
	b.waitJS("no paused mark", `document.querySelector('#paused-badge').hidden`)
	b.click("#queue-pause")
	b.waitJS("the paused mark", `!document.querySelector('#paused-badge').hidden`)
	b.waitText("#queue-pause", "Resume")
	if got := c.Props(q); !strings.Contains(got, `"paused":true`) {
		t.Fatalf("properties after Pause: %s", got)
	}
	b.open("#/queues")
	b.waitJS("the list's paused mark", `!!document.querySelector('tr[data-queue="ctl/jobs"] [data-paused]')`)

	b.open("#/queue/" + Q(q))
	b.waitText("#queue-pause", "Resume")
	b.click("#queue-pause")
	b.waitText("#queue-pause", "Pause")
	if got := c.Props(q); strings.Contains(got, `"paused":true`) {
		t.Fatalf("properties after Resume: %s", got)
	}
	b.setValue("#prop-max_inflight", "4")
	b.click("#props-save")
	b.waitContains(`tr[data-prop="max_inflight"]`, "4")
	if got := c.Props(q); !strings.Contains(got, `"max_inflight":4`) {
		t.Fatalf("properties after the edit: %s", got)
	}

	b.click("#queue-purge")
	b.click(`[data-confirm="yes"]`)
	b.waitText(`[data-stat="waiting"]`, "0")
	b.waitText("#control-result", "Purged.")
	c.Expect(http.StatusOK, http.MethodGet, "/queues/"+Q(q), nil)
	c.PullEmpty(q, "0")
	b.noErrors()
}
