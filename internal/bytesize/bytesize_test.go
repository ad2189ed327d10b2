package bytesize

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{
		"0":                   0,
		"1048576":             1 << 20,
		"64MB":                64_000_000,
		"64mb":                64_000_000,
		"64 MiB":              64 << 20,
		"10GiB":               10 << 30,
		"10gib":               10 << 30,
		"1.5GiB":              3 << 29,
		"2TB":                 2_000_000_000_000,
		"1TiB":                1 << 40,
		"512B":                512,
		"0.5KiB":              512,
		"1.0009KB":            1000,
		" 8 GB ":              8_000_000_000,
		"8388607TiB":          8388607 << 40,
		"9223372036854775807": 9223372036854775807,
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", " ", "MB", "-1", "-1MB", "+5", "1e9", "0x10", "Inf", "NaN", "1..5MB", ".", "5 M", "5K", "5G",
		"5 MBs", "10GiBB", "9223372036854775808", "8388608TiB", "9999999999TB", "1,5GB", "٣MB", "5 mega", "7EiB"} {
		if got, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %d, want an error", in, got)
		}
	}
	if _, err := Parse("5K"); !errors.Is(err, ErrSyntax) {
		t.Errorf("Parse(5K) error %v does not wrap ErrSyntax", err)
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{
		0:                   "0 B",
		512:                 "512 B",
		1024:                "1 KiB",
		48 << 20:            "48 MiB",
		12467306:            "11.89 MiB",
		3 << 29:             "1.5 GiB",
		1 << 40:             "1 TiB",
		-(2 << 20):          "-2 MiB",
		9223372036854775807: "8 EiB",
	} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
	// What Format writes, Parse reads back (to within its rounding).
	for _, n := range []int64{1 << 20, 48 << 20, 10 << 30} {
		if got, err := Parse(Format(n)); err != nil || got != n {
			t.Errorf("Parse(Format(%d)) = %d, %v", n, got, err)
		}
	}
}
