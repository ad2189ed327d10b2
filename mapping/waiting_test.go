package mapping

import (
	"slices"
	"strings"
	"testing"
)

// TestWaitingOf: the queue's own subject, its priority levels, its groups'
// heads and backlogs hold waiting messages (where, says WaitingOf);
// delays, parts, dead letters and other queues' subjects do not.
func TestWaitingOf(t *testing.T) {
	const q, other = "jobs", "other"
	for _, c := range []struct {
		subject string
		want    Waiting
		ok      bool
	}{
		{QueueSubject(q), Waiting{}, true},
		{PrioritySubject(q, 3), Waiting{Level: 3}, true},
		{HeadSubject(q, "g1"), Waiting{Group: "g1", Head: true}, true},
		{GroupSubject(q, "g1"), Waiting{Group: "g1"}, true},
		{ScheduleSubject(q, "id"), Waiting{}, false},
		{PartSubject(q), Waiting{}, false},
		{DeadSubject(q), Waiting{}, false},
		{QueueSubject(other), Waiting{}, false},
		{PrioritySubject(other, 3), Waiting{}, false},
		{HeadSubject(other, "g1"), Waiting{}, false},
		{GroupSubject(other, "g1"), Waiting{}, false},
		{"not.a.queue", Waiting{}, false},
	} {
		w, ok := WaitingOf(q, c.subject)
		if ok != c.ok || (ok && w != c.want) {
			t.Errorf("WaitingOf(%q): %+v %v, want %+v %v", c.subject, w, ok, c.want, c.ok)
		}
	}
}

// TestWaitingFilters: the queue's waiting filters cover what its levels'
// consumers read and its groups' backlogs; the counted kinds leave heads,
// delays, parts and dead letters out, and the shard's filters are one per
// counted kind.
func TestWaitingFilters(t *testing.T) {
	const q = "jobs"
	f := WaitingFilters(q)
	for _, s := range append(LevelSubjects(q, 0), PriorityWildcard(q), GroupWildcard(q)) {
		if !slices.Contains(f, s) {
			t.Errorf("WaitingFilters lacks %q: %q", s, f)
		}
	}
	if got := LevelSubjects(q, 2); !slices.Equal(got, []string{PrioritySubject(q, 2)}) {
		t.Errorf("LevelSubjects(2): %q", got)
	}
	for kind, want := range map[string]bool{"q": true, "p": true, "g": true, "h": false, "s": false, "a": false, "d": false} {
		if CountsWaiting(kind) != want {
			t.Errorf("CountsWaiting(%q) = %v", kind, !want)
		}
	}
	// lmq.<kind>.<kk>...: one filter per counted kind.
	var kinds []string
	for _, w := range ShardWaitingFilters(Shard(q)) {
		kinds = append(kinds, strings.Split(w, ".")[1])
	}
	slices.Sort(kinds)
	if want := []string{"g", "p", "q"}; !slices.Equal(kinds, want) {
		t.Errorf("ShardWaitingFilters' kinds %q, want %q", kinds, want)
	}
}
