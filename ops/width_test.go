package ops

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestDisplayWidth(t *testing.T) {
	for s, want := range map[string]int{
		"":          0,
		"queue":     5,
		"日本語":       6,
		"キュー":       6,
		"한국어":       6,
		"ｑｕｅｕｅ":     10, // fullwidth Latin
		"e\u0301":   1,  // e + combining acute
		"naïve":     5,
		"a\u200db":  2, // zero width joiner
		"🙂":         2,
		"x\xffy":    3, // invalid UTF-8: one column per bad byte
		"中a\u0308文": 5,
	} {
		if got := displayWidth(s); got != want {
			t.Errorf("displayWidth(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestPrintStatusWideNames: with CJK and combining-mark names the status
// table's columns still line up on a terminal: every row's later columns
// start at the same display column.
func TestPrintStatusWideNames(t *testing.T) {
	props := json.RawMessage(`{"accum":0,"retry":2,"timeout":30}`)
	doc := &StatsDoc{Queues: map[string]QueueDoc{
		"日本語のキュー":    {Size: 12, Memory: 3400, Props: props},
		"ascii":      {Size: 1, Memory: 10, Props: props},
		"cafe\u0301": {Size: 123456, Memory: 7, Props: props},
	}}
	var out bytes.Buffer
	if err := PrintStatus(&out, doc); err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(out.String(), "\n\n")
	want := "QUEUE           MESSAGES  BYTES  PROPERTIES\n" +
		"ascii           1         10     {\"accum\":0,\"retry\":2,\"timeout\":30}\n" +
		"cafe\u0301            123456    7      {\"accum\":0,\"retry\":2,\"timeout\":30}\n" +
		"日本語のキュー  12        3400   {\"accum\":0,\"retry\":2,\"timeout\":30}\n"
	if table != want {
		t.Errorf("status table:\n%s\nwant:\n%s", table, want)
	}
	// The same, independent of the expected text: each column starts at the
	// same display column on every line.
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	for _, col := range []string{"MESSAGES", "BYTES", "PROPERTIES"} {
		i := strings.Index(lines[0], col)
		for _, l := range lines[1:] {
			// Cell starts are where a space is followed by a non-space.
			if w := displayWidth(l[:cellStart(l, col)]); w != i {
				t.Errorf("column %s starts at display column %d in %q, header at %d", col, w, l, i)
			}
		}
	}
}

// cellStart is the byte offset of the n-th cell (by header name) of l.
func cellStart(l, col string) int {
	n := map[string]int{"MESSAGES": 1, "BYTES": 2, "PROPERTIES": 3}[col]
	off := 0
	for k := 0; k < n; k++ {
		j := strings.Index(l[off:], "  ")
		off += j
		for off < len(l) && l[off] == ' ' {
			off++
		}
	}
	return off
}
