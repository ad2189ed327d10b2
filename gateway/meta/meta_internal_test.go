package meta

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lmq-gateway/lmq-gateway/store"
)

// TestRecordBounds: a record within the bounds goes to JSON and back as it
// was; one beyond them is refused as ErrInvalid; what is stored is input,
// so a stored record too large or not JSON reads as an error (taken as
// none by read).
func TestRecordBounds(t *testing.T) {
	at := time.Date(2026, 11, 28, 10, 0, 0, 123, time.UTC)
	many := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[strings.Repeat("k", i+1)] = "v"
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		m       Meta
		invalid bool
	}{
		{"empty", Meta{}, false},
		{"times, tags, attributes", Meta{Created: at, Modified: at, Tags: map[string]string{"env": "prod"}, Attrs: map[string]string{"DelaySeconds": "5"}}, false},
		{"most tags", Meta{Tags: many(MaxTags)}, false},
		{"too many tags", Meta{Tags: many(MaxTags + 1)}, true},
		{"too many attributes", Meta{Attrs: many(MaxAttrs + 1)}, true},
		{"empty key", Meta{Tags: map[string]string{"": "v"}}, true},
		{"value not UTF-8", Meta{Attrs: map[string]string{"a": "\xff"}}, true},
		{"too large", Meta{Attrs: map[string]string{"Policy": strings.Repeat("x", MaxLen)}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := encodeMeta(tc.m)
			if tc.invalid {
				if !errors.Is(err, store.ErrInvalid) {
					t.Fatalf("encode: %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			back, err := decodeMeta(data)
			if err != nil {
				t.Fatal(err)
			}
			if !back.Created.Equal(tc.m.Created) || !back.Modified.Equal(tc.m.Modified) ||
				len(back.Tags) != len(tc.m.Tags) || len(back.Attrs) != len(tc.m.Attrs) {
				t.Fatalf("read back %+v, stored %+v", back, tc.m)
			}
		})
	}
	if _, err := decodeMeta([]byte("not json")); err == nil {
		t.Error("a stored record that is not JSON decoded")
	}
	if _, err := decodeMeta(make([]byte, MaxLen+1)); err == nil {
		t.Error("a stored record beyond MaxLen decoded")
	}
}
