package mapping

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// validSubjectToken reports whether tok may be one token of a NATS subject
// the gateway publishes on: not empty, no ".", no wildcard, no whitespace.
func validSubjectToken(tok string) bool {
	return tok != "" && !strings.ContainsAny(tok, ".*> \t\r\n")
}

// FuzzGroupName: the group names of queue control (?group= on a push, an
// SQS MessageGroupId) and the group subjects they become. A name
// ValidateGroup accepts is 1 to MaxGroupLen bytes of UTF-8 without control
// characters; its backlog and head subjects are the queue's subjects plus
// one valid token, and read back as the name. A subject GroupFromSubject
// reads (subjects come from NATS, where any program may publish) names a
// group ValidateGroup accepts.
func FuzzGroupName(f *testing.F) {
	for _, s := range [][2]string{
		{"orders", "g1"}, {"a-q", "\xff"}, {"a-q", "has space"}, {"q", "tab\there"}, {"q", "\x00"}, {"q", "\u2028"},
		{"q", "a.b.*.>"}, {"q", strings.Repeat("g", MaxGroupLen)}, {"q", strings.Repeat("g", MaxGroupLen+1)},
		{"q", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"}, {"q", ""}, {"x.fifo", "caf\u00e9"},
		{"lmq.g.07.abc.def", "lmq.h.07.abc.def"}, {"lmq.g.07.e9q6g.00", "lmq.h.07.e9q6g.ffffffff"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, queue, group string) {
		// Any subject first: the fuzzer's strings as NATS would hand them.
		for _, subj := range []string{queue, group} {
			if g, ok := GroupFromSubject(subj); ok && ValidateGroup(g) != nil {
				t.Fatalf("subject %q read as group %q, which ValidateGroup refuses", subj, g)
			}
		}
		if err := ValidateGroup(group); err != nil {
			return
		}
		if group == "" || len(group) > MaxGroupLen || !utf8.ValidString(group) || strings.IndexFunc(group, unicode.IsControl) >= 0 {
			t.Fatalf("group %q accepted", group)
		}
		if ValidateQueueName(queue) != nil {
			return
		}
		for _, pair := range [][2]string{{GroupSubject(queue, group), subject("g", queue)}, {HeadSubject(queue, group), subject("h", queue)}} {
			subj, base := pair[0], pair[1]
			tok, ok := strings.CutPrefix(subj, base+".")
			if !ok || !validSubjectToken(tok) {
				t.Fatalf("group %q of %q: subject %q is not %q plus one token", group, queue, subj, base)
			}
			if g, ok := GroupFromSubject(subj); !ok || g != group {
				t.Fatalf("group %q of %q: subject %q reads back as %q, %v", group, queue, subj, g, ok)
			}
		}
	})
}
