package kv

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Every way nats.go reports a write refused for its expected revision is a
// conflict: code 10071 (as itself, or as ErrKeyExists or
// ErrKeyRevisionMismatch) and the replicated streams' 10164, which matches
// neither sentinel on Create.
func TestWrongLastSeq(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: 10071, Description: "wrong last sequence: 4"}), true},
		{fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: 10164, Description: "wrong last sequence"}), true},
		{fmt.Errorf("x: %w", jetstream.ErrKeyExists), true},
		{fmt.Errorf("x: %w", jetstream.ErrKeyRevisionMismatch), true},
		{jetstream.ErrKeyNotFound, false},
		{fmt.Errorf("nats: %w", &jetstream.APIError{Code: 503, ErrorCode: 10023}), false},
		{nats.ErrTimeout, false},
	} {
		if got := wrongLastSeq(tc.err); got != tc.want {
			t.Errorf("wrongLastSeq(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A leader read tells a removal's marker by its headers, as nats.go's
// watcher does, and any marker it does not know is a removal too.
func TestMarkerOp(t *testing.T) {
	for _, tc := range []struct {
		kvOp, reason string
		want         Op
	}{
		{"", "", OpPut},
		{"DEL", "", OpDelete},
		{"PURGE", "", OpPurge},
		{"", "Remove", OpDelete},
		{"", "MaxAge", OpPurge},
		{"", "Purge", OpPurge},
		{"", "Something", OpPurge},
		{"OTHER", "", OpPurge},
	} {
		if got := markerOp(tc.kvOp, tc.reason); got != tc.want {
			t.Errorf("markerOp(%q, %q) = %v, want %v", tc.kvOp, tc.reason, got, tc.want)
		}
	}
}
