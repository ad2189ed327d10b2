package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/lmq"
)

// TestGoLibDataDir: the in-process Go API (package lmq) and the daemon use
// the same storage. A Go program leaves messages, properties and an
// unanswered delivery in its directory; the binary started on it serves
// them (the unanswered delivery given back by Close with its retry intact);
// what the binary leaves, the Go program pulls after it.
func TestGoLibDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	qs, err := lmq.Open(ctx, lmq.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	props, err := lmq.ParseProps(`{"retry":5}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := qs.SetProps(ctx, "handoff", props); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"first", "second"} {
		if err := qs.Push(ctx, "handoff", []byte(body), &lmq.PushOptions{ContentType: "text/plain"}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := qs.Pull(ctx, "handoff")
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Message.Body) != "first" || d.RetryRemaining != 5 {
		t.Fatalf("in-process pull: %q retry %d", d.Message.Body, d.RetryRemaining)
	}
	// Unanswered at Close: given back, not left to its timeout.
	if err := qs.Close(); err != nil {
		t.Fatal(err)
	}

	gw, c := StartClient(t, "--data-dir", dir)
	ExpectJSON(t, c.Expect(http.StatusOK, http.MethodGet, "/properties/handoff", nil), `{"accum":0,"retry":5,"timeout":30}`)
	got := map[string]bool{}
	for range 2 {
		r := c.Pull("handoff", "10")
		if r.Status != http.StatusOK {
			t.Fatalf("daemon pull: %v", r)
		}
		got[string(r.Body)] = true
		if rr := r.Header.Get("X-Lmq-Retry-Remaining"); rr != "5" {
			t.Errorf("%s: x-lmq-retry-remaining %s, want 5", r.Body, rr)
		}
		c.ExpectReply(http.StatusNoContent, "handoff", r.Header.Get("X-Lmq-Message-Id"), "ack")
	}
	if !got["first"] || !got["second"] {
		t.Fatalf("daemon pulled %v", got)
	}
	c.Push("back", []byte("from the daemon"), "text/plain")
	gw.Stop()

	qs, err = lmq.Open(ctx, lmq.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer qs.Close()
	d, err = qs.Pull(ctx, "back")
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Message.Body) != "from the daemon" || d.Message.ContentType != "text/plain" {
		t.Fatalf("in-process pull after the daemon: %q (%s)", d.Message.Body, d.Message.ContentType)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}
