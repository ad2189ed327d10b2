package console

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/ops"
)

func TestParseListQuery(t *testing.T) {
	for _, bad := range []string{"re=(", "sort=oldest_age", "desc=yes", "offset=-1", "limit=0", "limit=501", "re=" + strings.Repeat("a", maxRegexp+1)} {
		q, _ := url.ParseQuery(bad)
		if _, err := parseListQuery(q); err == nil {
			t.Errorf("%.40s: accepted", bad)
		}
	}
	q, _ := url.ParseQuery("re=^a&sort=waiting&desc=1&offset=5&limit=10")
	lq, err := parseListQuery(q)
	if err != nil || lq.re.String() != "^a" || lq.sort != "waiting" || !lq.desc || lq.offset != 5 || lq.limit != 10 {
		t.Fatalf("%+v %v", lq, err)
	}
	lq, err = parseListQuery(url.Values{})
	if err != nil || lq.re != nil || lq.sort != "name" || lq.desc || lq.limit != DefaultLimit {
		t.Fatalf("defaults: %+v %v", lq, err)
	}
}

func names(rows []Row) string {
	var s []string
	for _, r := range rows {
		s = append(s, r.Name)
	}
	return strings.Join(s, ",")
}

func TestSortRows(t *testing.T) {
	rows := []Row{{Name: "b", Waiting: 1}, {Name: "a", Waiting: 1}, {Name: "c", Waiting: 5}, {Name: "d"}}
	for _, tc := range []struct {
		key  string
		desc bool
		want string
	}{
		{"name", false, "a,b,c,d"},
		{"name", true, "d,c,b,a"},
		{"waiting", false, "d,a,b,c"},
		{"waiting", true, "c,a,b,d"}, // ties by name, ascending
	} {
		sortRows(rows, tc.key, tc.desc)
		if got := names(rows); got != tc.want {
			t.Errorf("%s desc=%v: %s, want %s", tc.key, tc.desc, got, tc.want)
		}
	}
}

// The sampler against a real ops.Stats: increments per interval, oldest
// first; counts from before the first sample are not a rate.
func TestSamplerRates(t *testing.T) {
	st := ops.NewStats(ops.StatsOptions{})
	st.Pushed("q", 1) // before the console watched
	s := newSampler(st)
	now := time.Now()
	s.sample(now)
	for range 10 {
		st.Pushed("q", 1)
	}
	st.Pulled("q", time.Second)
	s.sample(now.Add(SampleInterval))
	push, pull := s.rates("q")
	if push != 10/SampleInterval.Seconds() || pull != 1/SampleInterval.Seconds() {
		t.Fatalf("rates %v %v", push, pull)
	}
	st.Pushed("new", 1) // a queue first seen after the first sample
	s.sample(now.Add(2 * SampleInterval))
	ps, _ := s.series("q")
	if len(ps) != 2 || ps[0] != 2 || ps[1] != 0 {
		t.Fatalf("series %v", ps)
	}
	if ps, _ := s.series("new"); ps[1] != 1/SampleInterval.Seconds() {
		t.Fatalf("new queue's series %v", ps)
	}
	if ps, _ := s.series("unknown"); len(ps) != 2 || ps[0] != 0 {
		t.Fatalf("unknown queue's series %v", ps)
	}
	for range HistoryLen + 5 {
		now = now.Add(SampleInterval)
		s.sample(now)
	}
	if ps, _ := s.series("q"); len(ps) != HistoryLen {
		t.Fatalf("series longer than the history: %d", len(ps))
	}
}

func TestSources(t *testing.T) {
	got := sources([]byte(`{"accum":0,"retry":5,"timeout":60,"ttl":9}`), []byte(`{"ttl":9}`), []byte(`{"retry":5,"ttl":1}`))
	want := map[string]string{"accum": "system", "retry": "default", "timeout": "system", "ttl": "own"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
}

// A sample reads only the queues with events since the previous one, and
// keeps no history for queues idle over the whole chart; the rates and the
// chart of a busy queue are its increments all the same, over stretches of
// activity and idleness longer than the chart.
func TestSamplerIdleQueues(t *testing.T) {
	st := ops.NewStats(ops.StatsOptions{})
	s := newSampler(st)
	now := time.Now()
	s.sample(now)
	const idle = 1000
	for i := range idle {
		st.Pushed(fmt.Sprintf("idle%d", i), 1)
	}
	// The pushes per interval of "busy"; the reference is the chart as the
	// sampler drew it when it read every queue every time.
	pattern := func(k int) int {
		switch {
		case k < 10:
			return k % 3
		case k < 10+2*HistoryLen:
			return 0
		case k < 20+2*HistoryLen:
			return 5
		}
		return 0
	}
	var want []float64
	for k := range 4 * HistoryLen {
		for range pattern(k) {
			st.Pushed("busy", 1)
		}
		now = now.Add(SampleInterval)
		s.sample(now)
		if k == 0 && s.read != idle {
			t.Fatalf("sample after the idle queues' pushes read %d queues, want %d", s.read, idle)
		}
		if k > 0 && s.read > 1 {
			t.Fatalf("sample %d read %d queues, want at most the busy one", k, s.read)
		}
		want = append(want, float64(pattern(k))/SampleInterval.Seconds())
		w := want[max(len(want)-HistoryLen, 0):]
		push, _ := s.series("busy")
		if fmt.Sprint(push) != fmt.Sprint(w) {
			t.Fatalf("sample %d: chart %v, want %v", k, push, w)
		}
		if r, _ := s.rates("busy"); r != want[len(want)-1] {
			t.Fatalf("sample %d: rate %v, want %v", k, r, want[len(want)-1])
		}
		if r, _ := s.rates("idle3"); k > 0 && r != 0 {
			t.Fatalf("idle queue's rate %v", r)
		}
	}
	if ps, _ := s.series("idle3"); len(ps) != HistoryLen || ps[0] != 0 || ps[HistoryLen-1] != 0 {
		t.Errorf("idle queue's chart %v", ps)
	}
	s.mu.Lock()
	tracked := len(s.q)
	s.mu.Unlock()
	if tracked != 0 {
		t.Errorf("%d histories kept after %d idle samples, want none", tracked, 2*HistoryLen)
	}
}
