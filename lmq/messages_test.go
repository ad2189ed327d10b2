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

// TestMoveMessageInProcess: the in-process API moves a waiting message to
// another queue by id.
func TestMoveMessageInProcess(t *testing.T) {
	qs := open(t)
	ctx := t.Context()
	if err := qs.Push(ctx, "mv-src", []byte("m"), &lmq.PushOptions{ContentType: "text/plain"}); err != nil {
		t.Fatal(err)
	}
	ms, err := qs.Messages(ctx, "mv-src", 1, false)
	if err != nil || len(ms) != 1 {
		t.Fatalf("Messages: %+v, %v", ms, err)
	}
	if err := qs.MoveMessage(ctx, "mv-src", ms[0].Seq, "mv-src"); !errors.Is(err, lmq.ErrInvalid) {
		t.Fatalf("move to its own queue: %v", err)
	}
	if err := qs.MoveMessage(ctx, "mv-src", ms[0].Seq, "mv-dst"); err != nil {
		t.Fatal(err)
	}
	if err := qs.MoveMessage(ctx, "mv-src", ms[0].Seq, "mv-dst"); !errors.Is(err, lmq.ErrNotFound) {
		t.Fatalf("move twice: %v", err)
	}
	d, err := qs.Pull(ctx, "mv-dst")
	if err != nil || d == nil || string(d.Message.Body) != "m" || d.Message.ContentType != "text/plain" {
		t.Fatalf("pull from the target: %+v, %v", d, err)
	}
}
