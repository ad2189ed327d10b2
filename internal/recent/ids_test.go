package recent

import (
	"testing"
	"time"
)

// TestIDsBoundedInCountAndAge: the oldest id goes first once full, and an
// id older than keep is not answered.
func TestIDsBoundedInCountAndAge(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewIDs(2, time.Minute, func() time.Time { return now })
	s.Add("a")
	s.Add("b")
	if !s.Has("a") || !s.Has("b") || s.Has("c") {
		t.Fatal("wrong answers before full")
	}
	s.Add("c")
	if s.Has("a") || !s.Has("b") || !s.Has("c") {
		t.Fatal("the oldest was not the one forgotten")
	}
	now = now.Add(time.Minute)
	if s.Has("b") || s.Has("c") {
		t.Fatal("an id older than keep was answered")
	}
}
