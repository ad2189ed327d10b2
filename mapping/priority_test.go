package mapping

import (
	"strings"
	"testing"
)

func TestPriorityNames(t *testing.T) {
	for _, name := range []string{"a", "lmq/foo", strings.Repeat("x", 200), strings.Repeat("é", 500)} {
		if PrioritySubject(name, 0) != QueueSubject(name) {
			t.Errorf("priority 0 subject of %q differs from QueueSubject", name)
		}
		seen := map[string]bool{ConsumerName(name): true}
		for p := 1; p <= MaxPriority; p++ {
			subj := PrioritySubject(name, p)
			kind, enc, ok := ParseSubject(subj)
			if !ok || kind != "p" || enc != EncodeName(name) {
				t.Errorf("ParseSubject(%q) = %q %q %v", subj, kind, enc, ok)
			}
			if got, ok := SubjectPriority(subj); !ok || got != p {
				t.Errorf("SubjectPriority(%q) = %d %v", subj, got, ok)
			}
			c := PriorityConsumerName(name, p)
			if len(c) > maxNameLen || seen[c] || strings.ContainsAny(c, ".*> ") {
				t.Errorf("PriorityConsumerName(%q, %d) = %q", name, p, c)
			}
			seen[c] = true
			// Never a ConsumerName: those are base32hex or start with "_".
			if c[0] != 'p' || !strings.Contains(c[:3], "_") {
				t.Errorf("PriorityConsumerName %q lacks its mark", c)
			}
		}
		if p, ok := SubjectPriority(QueueSubject(name)); !ok || p != 0 {
			t.Errorf("SubjectPriority(q) = %d %v", p, ok)
		}
	}
	for _, s := range []string{"lmq.p.01.abc.0", "lmq.p.01.abc.10", "lmq.p.01.abc.x", "lmq.d.01.abc", "lmq.p.01.abc"} {
		if p, ok := SubjectPriority(s); ok {
			t.Errorf("SubjectPriority(%q) = %d, ok", s, p)
		}
	}
	for _, s := range []string{"0", "9", "5"} {
		if _, err := ParsePriority(s); err != nil {
			t.Errorf("ParsePriority(%q): %v", s, err)
		}
	}
	for _, s := range []string{"", "10", "-1", "+1", " 1", "1.0", "x"} {
		if _, err := ParsePriority(s); err == nil {
			t.Errorf("ParsePriority(%q) accepted", s)
		}
	}
}
