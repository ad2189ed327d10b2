package store

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestEncodePullRequest checks the hand-written pull request body against
// what JetStream decodes (JSApiConsumerGetNextRequest's JSON names).
func TestEncodePullRequest(t *testing.T) {
	type next struct {
		Batch   int           `json:"batch"`
		NoWait  bool          `json:"no_wait"`
		Expires time.Duration `json:"expires"`
	}
	for _, c := range []struct {
		batch  int
		settle time.Duration
	}{{1, 0}, {256, 0}, {16, 50 * time.Millisecond}, {7, time.Nanosecond}} {
		b := EncodePullRequest(c.batch, c.settle)
		var got next
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if want := (next{Batch: c.batch, NoWait: true, Expires: c.settle}); got != want {
			t.Errorf("%s decodes to %+v, want %+v", b, got, want)
		}
	}
}
