package mapping

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseSeconds(t *testing.T) {
	ok := []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"0.25", 250 * time.Millisecond},
		{"30", 30 * time.Second},
		{"1e3", 1000 * time.Second},
		{"315360000", MaxDuration},
		{"3.1536e8", MaxDuration},
	}
	for _, tt := range ok {
		got, err := ParseSeconds("t", tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSeconds(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	// Each of these overflowed, wrapped or waited forever before the range.
	for _, in := range []string{"", "x", "-1", "-0.001", "315360000.001", "8e9", "1e10",
		"9000000000", "1e400", "NaN", "nan", "Inf", "+Inf", "-Inf", "0x1p70", "%zz"} {
		got, err := ParseSeconds("delay", in)
		if err == nil {
			t.Errorf("ParseSeconds(%q) = %v, want an error", in, got)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "delay ") || !strings.Contains(msg, "315360000") {
			t.Errorf("ParseSeconds(%q): error %q does not name the parameter and the range", in, msg)
		}
	}
}

func TestCheckSeconds(t *testing.T) {
	for _, f := range []float64{0, 1e-9, 1, MaxSeconds} {
		if err := CheckSeconds("ttl", f); err != nil {
			t.Errorf("CheckSeconds(%v): %v", f, err)
		}
	}
	for _, f := range []float64{-1e-9, math.Copysign(0, -1) - 1, MaxSeconds + 1e-3, 1e10, math.NaN(), math.Inf(1), math.Inf(-1)} {
		if err := CheckSeconds("ttl", f); err == nil {
			t.Errorf("CheckSeconds(%v) accepted", f)
		}
	}
	// The largest accepted duration is far from overflowing when added to any
	// time this side of 2200 (the failure was past 2262).
	far := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := far.Add(MaxDuration); !got.After(far) || got.Year() != 2209 {
		t.Errorf("2200 + MaxDuration = %v", got)
	}
	if d, err := SecondsDuration("t", MaxSeconds); err != nil || d != MaxDuration {
		t.Errorf("SecondsDuration(MaxSeconds) = %v, %v", d, err)
	}
}
