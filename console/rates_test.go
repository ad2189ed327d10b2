package console

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/ops"
)

// The long history sums every queue per minute, starts at the first sample,
// reads stale minutes as zeros and stays LongLen points long.
func TestSamplerLongHistory(t *testing.T) {
	st := ops.NewStats(ops.StatsOptions{})
	st.Pushed("a", 1) // before the console watched: not counted
	s := newSampler(st)
	t0 := time.Unix(1_800_000_000/60*60, 0) // on a minute
	if h := s.longHistory(t0); len(h.Push) != 0 || !h.Since.IsZero() {
		t.Fatalf("before any sample: %+v", h)
	}
	s.sample(t0)
	st.Pushed("a", 1)
	st.Pushed("b", 1)
	st.Pulled("a", time.Second)
	s.sample(t0.Add(SampleInterval))
	st.Pushed("b", 1)
	s.sample(t0.Add(2 * SampleInterval))
	// Next minute: one pull.
	st.Pulled("b", time.Second)
	s.sample(t0.Add(time.Minute + SampleInterval))

	h := s.longHistory(t0.Add(time.Minute + 2*SampleInterval))
	if !h.Start.Equal(t0) || !h.Since.Equal(t0) || h.Step != 60 {
		t.Fatalf("start %v since %v step %v", h.Start, h.Since, h.Step)
	}
	if len(h.Push) != 2 || h.Push[0] != 3 || h.Push[1] != 0 || h.Pull[0] != 1 || h.Pull[1] != 1 {
		t.Fatalf("push %v pull %v", h.Push, h.Pull)
	}

	// Three hours later, with nothing since: LongLen points of zeros, the
	// old minutes gone.
	later := t0.Add(3 * time.Hour)
	s.sample(later)
	h = s.longHistory(later)
	if len(h.Push) != LongLen || !h.Start.Equal(later.Add(-(LongLen-1)*LongStep)) {
		t.Fatalf("%d points from %v", len(h.Push), h.Start)
	}
	for i, v := range h.Push {
		if v != 0 || h.Pull[i] != 0 {
			t.Fatalf("point %d: %d/%d, want zeros", i, v, h.Pull[i])
		}
	}
	if LongLen*LongStep < time.Hour {
		t.Fatal("the long history must cover at least an hour")
	}

	// The API's shape.
	b, _ := json.Marshal(Rates{Gateway: "g", Scope: "gateway", LongHistory: h, Series: PrometheusSeries})
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"gateway", "scope", "step", "start", "since", "push", "pull", "series"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %q in %s", k, b[:min(len(b), 200)])
		}
	}
}
