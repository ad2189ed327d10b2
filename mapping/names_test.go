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
			if strings.ToLower(enc) != enc {
				t.Errorf("EncodeName(%q) = %q, not case-free", name, enc)
			}
		})
	}
}

func TestKnownEncoding(t *testing.T) {
	// Pin the format: stream names already on disk depend on it.
	if got, want := StreamName("lmq/foo"), "LMQ_dhmn2br6dtng"; got != want {
		t.Errorf("StreamName(lmq/foo) = %q, want %q", got, want)
	}
	if got, want := QueueSubject("a"), "lmq.q.c4"; got != want {
		t.Errorf("QueueSubject(a) = %q, want %q", got, want)
	}
}

func TestLongNames(t *testing.T) {
	for _, n := range []int{150, 156, 157, 200, 254, 255} {
		name := strings.Repeat("z", n)
		s := StreamName(name)
		if !validStreamName(s) {
			t.Errorf("StreamName(%d bytes) = %q (%d bytes), not a valid stream name", n, s, len(s))
		}
		if enc := EncodeName(name); strings.HasPrefix(enc, hashMark) {
			if _, ok := DecodeName(enc); ok {
				t.Errorf("DecodeName of hashed %d-byte name reported ok", n)
			}
		} else if got, ok := DecodeName(enc); !ok || got != name {
			t.Errorf("round trip of %d-byte name failed", n)
		}
	}
	// Two long names differing only in their last byte.
	a, b := strings.Repeat("y", 254)+"1", strings.Repeat("y", 254)+"2"
	if StreamName(a) == StreamName(b) {
		t.Errorf("long names %q and %q share stream %q", a, b, StreamName(a))
	}
}

func TestDistinctStreams(t *testing.T) {
	names := append([]string{}, nameCases...)
	names = append(names, "lmq.foo", "lmq_foo", "LMQ/FOO", "a b", "a\u00a0b",
		strings.Repeat("z", 255), strings.Repeat("z", 254))
	seen := map[string]string{}
	for _, n := range names {
		s := StreamName(n)
		if prev, dup := seen[s]; dup {
			t.Errorf("%q and %q share stream %q", prev, n, s)
		}
		seen[s] = n
	}
}

func TestValidateQueueName(t *testing.T) {
	bad := map[string]string{
		"empty":        "",
		"nul":          "a\x00b",
		"newline":      "a\nb",
		"del":          "a\x7fb",
		"c1 control":   "a\u0085b",
		"256 bytes":    strings.Repeat("a", 256),
		"invalid utf8": "a\xffb",
	}
	for label, name := range bad {
		if err := ValidateQueueName(name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("%s: ValidateQueueName = %v, want ErrInvalidName", label, err)
		}
	}
	if err := ValidateQueueName(strings.Repeat("a", 255)); err != nil {
		t.Errorf("255 bytes: %v", err)
	}
}

func TestSubjectsAndStreams(t *testing.T) {
	for _, name := range nameCases {
		enc := EncodeName(name)
		kind, got, ok := EncFromSubject(QueueSubject(name))
		if !ok || kind != "q" || got != enc {
			t.Errorf("EncFromSubject(QueueSubject(%q)) = %q, %q, %v", name, kind, got, ok)
		}
		kind, got, ok = EncFromSubject(PartSubject(name))
		if !ok || kind != "a" || got != enc {
			t.Errorf("EncFromSubject(PartSubject(%q)) = %q, %q, %v", name, kind, got, ok)
		}
		if got, ok := QueueFromStream(StreamName(name)); !ok || got != enc {
			t.Errorf("QueueFromStream(StreamName(%q)) = %q, %v", name, got, ok)
		}
	}
	for _, s := range []string{"", "LMQ_", "KV_foo"} {
		if _, ok := QueueFromStream(s); ok {
			t.Errorf("QueueFromStream(%q) ok", s)
		}
	}
	for _, s := range []string{"lmq", "lmq.q", "lmq.q.", "lmq.q.a.b", "other.q.a"} {
		if _, _, ok := EncFromSubject(s); ok {
			t.Errorf("EncFromSubject(%q) ok", s)
		}
	}
}
