package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/testnats"
)

// A full store is unavailable (503 with Retry-After: space may come back);
// headers JetStream refuses are too large (431), never unavailable.
func TestClassifyAPIError(t *testing.T) {
	apiErr := func(code int, ec jetstream.ErrorCode, desc string) error {
		// As nats.go returns a refused publish.
		return fmt.Errorf("nats: %w", &jetstream.APIError{Code: code, ErrorCode: ec, Description: desc})
	}
	for _, tc := range []struct {
		err           error
		want, notWant error
	}{
		{apiErr(503, 10023, "insufficient resources"), ErrUnavailable, ErrHeaderTooLarge},
		{apiErr(500, 10028, "insufficient memory resources available"), ErrUnavailable, ErrHeaderTooLarge},
		{apiErr(500, 10047, "insufficient storage resources available"), ErrUnavailable, ErrHeaderTooLarge},
		{apiErr(400, 10097, "header size exceeds maximum allowed of 64k"), ErrHeaderTooLarge, ErrUnavailable},
		{apiErr(500, 10999, "something new"), ErrUnavailable, ErrHeaderTooLarge},
		{errors.New("no space left on device"), ErrUnavailable, ErrHeaderTooLarge},
	} {
		got := Classify("store message", tc.err)
		if !errors.Is(got, tc.want) || errors.Is(got, tc.notWant) {
			t.Errorf("Classify(%v) = %v: want %v, not %v", tc.err, got, tc.want, tc.notWant)
		}
		if !strings.Contains(got.Error(), tc.err.Error()) {
			t.Errorf("Classify(%v) = %v: lost the cause", tc.err, got)
		}
	}
}

// The backstop on a real JetStream: a publish whose headers exceed what
// JetStream takes is classified as too large, not unavailable.
func TestJetStreamHeaderLimitClassified(t *testing.T) {
	ns := testnats.Start(t)
	nc := testnats.Connect(t, ns, "test")
	js := testnats.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "HDR", Subjects: []string{"hdr"}}); err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg("hdr")
	m.Header.Set("Lmq-Content-Type", strings.Repeat("a", 70<<10))
	_, err := js.PublishMsg(ctx, m)
	if err == nil {
		t.Fatal("JetStream stored a message with 70 KiB of headers")
	}
	if got := Classify("store message", err); !errors.Is(got, ErrHeaderTooLarge) {
		t.Fatalf("Classify(%v) = %v, want ErrHeaderTooLarge", err, got)
	}
}

// TestClassify: what Classify makes of each failure front ends may see. Its
// own sentinels and a canceled context pass through (wrapped with op); an
// error already wrapping ErrUnknown stays unknown and is never also
// ErrUnavailable (which promises that nothing happened); anything else is
// unavailable. The cause is kept.
func TestClassify(t *testing.T) {
	t.Parallel()
	unknown := fmt.Errorf("store message: %w: %w", ErrUnknown, nats.ErrTimeout)
	for _, tc := range []struct {
		name    string
		err     error
		want    []error
		notWant []error
	}{
		{"not found", fmt.Errorf("queue q: %w", ErrNotFound), []error{ErrNotFound}, []error{ErrUnavailable}},
		{"invalid", fmt.Errorf("%w: bad name", ErrInvalid), []error{ErrInvalid}, []error{ErrUnavailable}},
		{"too large", fmt.Errorf("%w: 9 bytes", ErrTooLarge), []error{ErrTooLarge}, []error{ErrUnavailable}},
		{"canceled", context.Canceled, []error{context.Canceled}, []error{ErrUnavailable, ErrUnknown}},
		{"canceled, wrapped", fmt.Errorf("read: %w", context.Canceled), []error{context.Canceled}, []error{ErrUnavailable, ErrUnknown}},
		{"deadline", context.DeadlineExceeded, []error{ErrUnavailable, context.DeadlineExceeded}, []error{ErrUnknown}},
		{"timeout", nats.ErrTimeout, []error{ErrUnavailable}, []error{ErrUnknown}},
		{"no responders", nats.ErrNoResponders, []error{ErrUnavailable}, []error{ErrUnknown}},
		{"already unknown", unknown, []error{ErrUnknown, nats.ErrTimeout}, []error{ErrUnavailable}},
		{"already unknown, wrapped twice", fmt.Errorf("batch: %w", fmt.Errorf("part 2: %w", unknown)), []error{ErrUnknown}, []error{ErrUnavailable}},
		{"other", errors.New("boom"), []error{ErrUnavailable}, []error{ErrUnknown}},
	} {
		got := Classify("op", tc.err)
		for _, w := range tc.want {
			if !errors.Is(got, w) {
				t.Errorf("%s: Classify(%v) = %v, want it to wrap %v", tc.name, tc.err, got, w)
			}
		}
		for _, nw := range tc.notWant {
			if errors.Is(got, nw) {
				t.Errorf("%s: Classify(%v) = %v, must not wrap %v", tc.name, tc.err, got, nw)
			}
		}
		if !strings.HasPrefix(got.Error(), "op: ") || !strings.Contains(got.Error(), tc.err.Error()) {
			t.Errorf("%s: Classify(%v) = %q: want op and the cause", tc.name, tc.err, got)
		}
	}
	if Classify("op", nil) != nil {
		t.Error("Classify(nil) is not nil")
	}
}

// TestOutcome: a failed state change whose request may have reached
// JetStream (a timeout, a deadline, the connection lost) is unknown, never
// unavailable; one that certainly did not (no responders, a refusal) is
// Classify's; a canceled context passes through; an error already wrapping
// ErrUnknown is not wrapped in it twice.
func TestOutcome(t *testing.T) {
	t.Parallel()
	unknown := fmt.Errorf("store message: %w: %w", ErrUnknown, nats.ErrTimeout)
	full := fmt.Errorf("nats: %w", &jetstream.APIError{Code: 503, ErrorCode: 10023, Description: "insufficient resources"})
	for _, tc := range []struct {
		name    string
		err     error
		want    error
		notWant []error
	}{
		{"deadline", context.DeadlineExceeded, ErrUnknown, []error{ErrUnavailable}},
		{"deadline, wrapped", fmt.Errorf("publish: %w", context.DeadlineExceeded), ErrUnknown, []error{ErrUnavailable}},
		{"timeout", nats.ErrTimeout, ErrUnknown, []error{ErrUnavailable}},
		{"connection closed", nats.ErrConnectionClosed, ErrUnknown, []error{ErrUnavailable}},
		{"draining", nats.ErrConnectionDraining, ErrUnknown, []error{ErrUnavailable}},
		{"disconnected", nats.ErrDisconnected, ErrUnknown, []error{ErrUnavailable}},
		{"canceled", context.Canceled, context.Canceled, []error{ErrUnavailable, ErrUnknown}},
		{"no responders", nats.ErrNoResponders, ErrUnavailable, []error{ErrUnknown}},
		{"store full", full, ErrUnavailable, []error{ErrUnknown}},
		{"not found", fmt.Errorf("queue q: %w", ErrNotFound), ErrNotFound, []error{ErrUnavailable, ErrUnknown}},
		{"already unknown", unknown, ErrUnknown, []error{ErrUnavailable}},
		{"already unknown, wrapped", fmt.Errorf("batch: %w", unknown), ErrUnknown, []error{ErrUnavailable}},
	} {
		got := Outcome("op", tc.err)
		if !errors.Is(got, tc.want) {
			t.Errorf("%s: Outcome(%v) = %v, want it to wrap %v", tc.name, tc.err, got, tc.want)
		}
		for _, nw := range tc.notWant {
			if errors.Is(got, nw) {
				t.Errorf("%s: Outcome(%v) = %v, must not wrap %v", tc.name, tc.err, got, nw)
			}
		}
		if !strings.Contains(got.Error(), tc.err.Error()) {
			t.Errorf("%s: Outcome(%v) = %q: lost the cause", tc.name, tc.err, got)
		}
		if n := strings.Count(got.Error(), ErrUnknown.Error()); n > 1 {
			t.Errorf("%s: Outcome(%v) = %q: says unknown %d times", tc.name, tc.err, got, n)
		}
	}
	if Outcome("op", nil) != nil {
		t.Error("Outcome(nil) is not nil")
	}
}
