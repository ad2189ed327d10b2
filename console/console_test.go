package console

import (
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
