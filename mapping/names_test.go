package mapping

import (
	"errors"
	"strings"
	"testing"
	"unicode"
)

// validStreamName applies JetStream's rules for stream names (which become
// directory names): no ". * > / \", no whitespace or control characters, at
// most 255 bytes, not empty.
func validStreamName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, r := range s {
		if strings.ContainsRune(".*>/\\", r) || unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

var nameCases = []string{
	"lmq/foo", "a:b", "a.b", "with space", "日本語", "+", "x",
	"*", ">", "a\\b", "A", "a", // case must matter: A and a are different queues
	strings.Repeat("q", 150), strings.Repeat("é", 78), // 156 bytes: longest direct encoding
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, name := range nameCases {
		t.Run(name, func(t *testing.T) {
			if err := ValidateQueueName(name); err != nil {
				t.Fatalf("ValidateQueueName(%q) = %v", name, err)
			}
			enc := EncodeName(name)
			got, ok := DecodeName(enc)
			if !ok || got != name {
				t.Errorf("DecodeName(EncodeName(%q)) = %q, %v; want %q, true", name, got, ok, name)
			}
			if s := StreamName(name); !validStreamName(s) {
				t.Errorf("StreamName(%q) = %q, not a valid stream name", name, s)
			}
			if c := ConsumerName(name); !validStreamName(c) {
				t.Errorf("ConsumerName(%q) = %q, not a valid consumer name", name, c)
			}
			if strings.ToLower(enc) != enc {
				t.Errorf("EncodeName(%q) = %q, not case-free", name, enc)
			}
		})
	}
}

func TestKnownEncoding(t *testing.T) {
	// Pin the format: subjects, keys and shards already on disk depend on it.
	if got, want := EncodeName("lmq/foo"), "dhmn2br6dtng"; got != want {
		t.Errorf("EncodeName(lmq/foo) = %q, want %q", got, want)
	}
	if got, want := Shard("a"), 0xe40c292c%ShardCount; got != want {
		t.Errorf("Shard(a) = %d, want %d", got, want)
	}
	if got, want := QueueSubject("a"), "lmq.q.44.c4"; got != want {
		t.Errorf("QueueSubject(a) = %q, want %q", got, want)
	}
	if got, want := StreamName("a"), "LMQS_44"; got != want {
		t.Errorf("StreamName(a) = %q, want %q", got, want)
	}
	if got, want := ScheduleSubject("a", "x"), "lmq.s.44.c4.x"; got != want {
		t.Errorf("ScheduleSubject = %q, want %q", got, want)
	}
	if got, want := LegacyStreamName("lmq/foo"), "LMQ_dhmn2br6dtng"; got != want {
		t.Errorf("LegacyStreamName(lmq/foo) = %q, want %q", got, want)
	}
}

func TestLongNames(t *testing.T) {
	for _, n := range []int{150, 156, 157, 200, 254, 255, 256, 1000, MaxQueueNameLen} {
		name := strings.Repeat("z", n)
		if err := ValidateQueueName(name); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if got, ok := DecodeName(EncodeName(name)); !ok || got != name {
			t.Errorf("round trip of %d-byte name failed", n)
		}
		if c := ConsumerName(name); !validStreamName(c) {
			t.Errorf("ConsumerName(%d bytes) = %q, not valid", n, c)
		}
		if s := LegacyStreamName(name); n <= 255 && !validStreamName(s) {
			t.Errorf("LegacyStreamName(%d bytes) = %q, not valid", n, s)
		}
	}
	// Two long names differing only in their last byte.
	a, b := strings.Repeat("y", 1000)+"1", strings.Repeat("y", 1000)+"2"
	if ConsumerName(a) == ConsumerName(b) || QueueSubject(a) == QueueSubject(b) {
		t.Errorf("long names share a consumer or subject")
	}
}

func TestDistinctNames(t *testing.T) {
	names := append([]string{}, nameCases...)
	names = append(names, "lmq.foo", "lmq_foo", "LMQ/FOO", "a b", "a\u00a0b",
		strings.Repeat("z", 255), strings.Repeat("z", 254))
	seenC, seenS := map[string]string{}, map[string]string{}
	for _, n := range names {
		c, s := ConsumerName(n), QueueSubject(n)
		if prev, dup := seenC[c]; dup {
			t.Errorf("%q and %q share consumer %q", prev, n, c)
		}
		if prev, dup := seenS[s]; dup {
			t.Errorf("%q and %q share subject %q", prev, n, s)
		}
		seenC[c], seenS[s] = n, n
	}
}

func TestValidateQueueName(t *testing.T) {
	bad := map[string]string{
		"empty":        "",
		"nul":          "a\x00b",
		"newline":      "a\nb",
		"del":          "a\x7fb",
		"c1 control":   "a\u0085b",
		"1025 bytes":   strings.Repeat("a", MaxQueueNameLen+1),
		"invalid utf8": "a\xffb",
	}
	for label, name := range bad {
		if err := ValidateQueueName(name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("%s: ValidateQueueName = %v, want ErrInvalidName", label, err)
		}
	}
	if err := ValidateQueueName(strings.Repeat("a", MaxQueueNameLen)); err != nil {
		t.Errorf("%d bytes: %v", MaxQueueNameLen, err)
	}
}

func TestSubjectsAndStreams(t *testing.T) {
	for _, name := range nameCases {
		enc := EncodeName(name)
		for kind, subj := range map[string]string{"q": QueueSubject(name), "a": PartSubject(name),
			"d": DeadSubject(name), "s": ScheduleSubject(name, "id1")} {
			k, got, ok := ParseSubject(subj)
			if !ok || k != kind || got != enc {
				t.Errorf("ParseSubject(%q) = %q, %q, %v", subj, k, got, ok)
			}
		}
		k, ok := ShardFromStream(StreamName(name))
		if !ok || k != Shard(name) {
			t.Errorf("ShardFromStream(StreamName(%q)) = %d, %v", name, k, ok)
		}
	}
	for _, s := range []string{"", "LMQS_", "LMQS_64", "LMQS_7", "LMQS_007", "KV_foo", "LMQ_c4"} {
		if _, ok := ShardFromStream(s); ok {
			t.Errorf("ShardFromStream(%q) ok", s)
		}
	}
	for _, s := range []string{"lmq", "lmq.q", "lmq.q.", "lmq.q.44", "lmq.q.44.", "lmq.q.44.a.b", "lmq.s.44.a", "other.q.44.a", "lmq.q.c4"} {
		if _, _, ok := ParseSubject(s); ok {
			t.Errorf("ParseSubject(%q) ok", s)
		}
	}
	for _, s := range []string{"lmq", "lmq.n", "lmq.n.", "lmq.n.a.b", "other.n.a"} {
		if _, _, ok := EncFromSubject(s); ok {
			t.Errorf("EncFromSubject(%q) ok", s)
		}
	}
}
