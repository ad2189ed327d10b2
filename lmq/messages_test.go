package lmq_test

import (
	"errors"
	"testing"

	"github.com/lmq-gateway/lmq-gateway/lmq"
)

// TestMessagesInProcess: the in-process API lists the waiting messages and
// deletes one by id; the deleted one is never pulled.
func TestMessagesInProcess(t *testing.T) {
	qs := open(t)
	ctx := t.Context()
	for _, b := range []string{"keep", "drop"} {
		if err := qs.Push(ctx, "peeked", []byte(b), &lmq.PushOptions{ContentType: "text/plain"}); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := qs.Messages(ctx, "peeked", lmq.MaxListed, true)
	if err != nil || len(ms) != 2 || string(ms[1].Body) != "drop" || ms[1].ContentType != "text/plain" {
		t.Fatalf("Messages: %+v, %v", ms, err)
	}
	if err := qs.DeleteMessage(ctx, "peeked", ms[1].Seq); err != nil {
		t.Fatal(err)
	}
	if err := qs.DeleteMessage(ctx, "peeked", ms[1].Seq); !errors.Is(err, lmq.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := qs.Messages(ctx, "peeked", 0, false); !errors.Is(err, lmq.ErrInvalid) {
		t.Fatalf("n=0: %v", err)
	}
	d, err := qs.Pull(ctx, "peeked")
	if err != nil || string(d.Message.Body) != "keep" {
		t.Fatalf("pull: %v", err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if ms, err := qs.Messages(ctx, "peeked", 10, false); err != nil || len(ms) != 0 {
		t.Fatalf("Messages after: %+v, %v", ms, err)
	}
}
