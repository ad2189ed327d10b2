package ops

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// wideRanges are the common East Asian Wide and Fullwidth blocks (UAX #11):
// a terminal gives their characters two columns. Not the whole table, which
// would need a dependency; queue names outside these are rarely wide.
var wideRanges = [...]struct{ lo, hi rune }{
	{0x1100, 0x115F},   // Hangul Jamo initial consonants
	{0x2E80, 0x303E},   // CJK radicals, Kangxi, CJK symbols and punctuation
	{0x3041, 0x33FF},   // Hiragana, Katakana, Bopomofo, Hangul compatibility, CJK compatibility
	{0x3400, 0x4DBF},   // CJK extension A
	{0x4E00, 0x9FFF},   // CJK unified ideographs
	{0xA000, 0xA4CF},   // Yi
	{0xA960, 0xA97F},   // Hangul Jamo extended A
	{0xAC00, 0xD7A3},   // Hangul syllables
	{0xF900, 0xFAFF},   // CJK compatibility ideographs
	{0xFE10, 0xFE19},   // vertical forms
	{0xFE30, 0xFE6F},   // CJK compatibility forms, small form variants
	{0xFF00, 0xFF60},   // fullwidth forms
	{0xFFE0, 0xFFE6},   // fullwidth signs
	{0x1F300, 0x1F64F}, // pictographs, emoticons
	{0x1F900, 0x1F9FF}, // supplemental symbols and pictographs
	{0x20000, 0x2FFFD}, // CJK extensions B and beyond
	{0x30000, 0x3FFFD}, // CJK extension G and beyond
}

// displayWidth is the number of terminal columns s takes: East Asian wide
// characters count two, combining marks and zero-width format characters
// none, everything else one (so a byte of invalid UTF-8 too).
func displayWidth(s string) int {
	w := 0
	for _, r := range s {
		w += runeWidth(r)
	}
	return w
}

func runeWidth(r rune) int {
	switch {
	case r == utf8.RuneError:
		return 1
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		// Combining marks, ZERO WIDTH JOINER, variation selectors…
		return 0
	}
	for _, rg := range wideRanges {
		if r < rg.lo {
			break
		}
		if r <= rg.hi {
			return 2
		}
	}
	return 1
}

// padRight pads s with spaces to width display columns.
func padRight(s string, width int) string {
	if n := width - displayWidth(s); n > 0 {
		return s + strings.Repeat(" ", n)
	}
	return s
}

// writeTable lays rows out in columns two spaces apart, by display width,
// which text/tabwriter does not know (it counts a CJK character as one
// column). The last column is not padded.
func writeTable(b *strings.Builder, rows [][]string) {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], displayWidth(cell))
		}
	}
	for _, row := range rows {
		for i, cell := range row {
			if i == len(row)-1 {
				b.WriteString(cell)
				break
			}
			b.WriteString(padRight(cell, widths[i]+2))
		}
		b.WriteByte('\n')
	}
}
