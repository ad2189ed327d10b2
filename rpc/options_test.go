package rpc

import (
	"testing"

	"github.com/lmq-gateway/lmq-gateway/internal/lmqtest/fakecore"
)

// TestMaxTotalAnswerBytesDefault: 0 is the documented default, negative
// no bound (issue 40, item 12: 0 was no bound).
func TestMaxTotalAnswerBytesDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opt            Options
		perConn, total int // 0: no bound
	}{
		{Options{}, DefaultMaxAnswerBytes, DefaultMaxTotalAnswers},
		{Options{MaxAnswerBytes: -1, MaxTotalAnswerBytes: -1}, 0, 0},
		{Options{MaxAnswerBytes: 1000, MaxTotalAnswerBytes: 5000}, 1000, 5000},
	} {
		s := New(coreOf(fakecore.New()), tc.opt)
		got := s.answers
		if (got == nil) != (tc.total == 0) || (got != nil && got.limit != tc.total) {
			t.Errorf("Options %+v: server-wide answer bound %+v, want %d", tc.opt, got, tc.total)
		}
		if o := s.Options(); max(o.MaxAnswerBytes, 0) != tc.perConn || max(o.MaxTotalAnswerBytes, 0) != tc.total {
			t.Errorf("Options %+v: in effect %d per connection and %d in total, want %d and %d",
				tc.opt, o.MaxAnswerBytes, o.MaxTotalAnswerBytes, tc.perConn, tc.total)
		}
	}
}
