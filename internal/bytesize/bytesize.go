// Package bytesize reads and writes sizes in bytes as people write them:
// "64MB", "10GiB", "1.5 TB", "1048576". KB, MB, GB, TB are powers of 1000
// and KiB, MiB, GiB, TiB powers of 1024, as their standards say; units are
// read without regard to case ("64mb", "10gib"), K, M, G, T alone are
// refused as ambiguous.
package bytesize

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// units are the accepted suffixes, longest first within each family so that
// "MiB" is not read as "M" + "iB".
var units = []struct {
	suffix string
	mult   float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"b", 1},
}

// ErrSyntax is wrapped by Parse's answer to text that is not a size.
var ErrSyntax = errors.New("not a size: want a number of bytes, optionally with a unit B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), e.g. 64MB or 10GiB")

// Parse reads a size in bytes: a non-negative decimal number (fractions
// allowed with a unit: "1.5GiB"), an optional space and an optional unit. A
// size that does not fit in an int64 is refused; a fraction of a byte is
// dropped.
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	lower := strings.ToLower(t)
	mult := float64(1)
	num := lower
	for _, u := range units {
		if strings.HasSuffix(lower, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(lower, u.suffix)), u.mult
			break
		}
	}
	if num == "" || !isDecimal(num) {
		return 0, fmt.Errorf("%q: %w", s, ErrSyntax)
	}
	if mult == 1 && !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q: too large (at most %d bytes)", s, int64(math.MaxInt64))
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, ErrSyntax)
	}
	v := math.Floor(f * mult)
	// float64(MaxInt64) rounds up to 2^63, which does not fit.
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("%q: too large (at most %d bytes)", s, int64(math.MaxInt64))
	}
	return int64(v), nil
}

// isDecimal: digits with at most one '.', and at least one digit. No sign,
// exponent, hexadecimal, Inf or NaN, which ParseFloat would take.
func isDecimal(s string) bool {
	digits, dots := 0, 0
	for _, r := range s {
		switch {
		case r == '.':
			dots++
		case r <= unicode.MaxASCII && unicode.IsDigit(r):
			digits++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// Format writes n in the largest binary unit that leaves at least 1, with
// up to two decimals: "48 MiB", "11.89 MiB", "512 B".
func Format(n int64) string {
	if n < 0 {
		return "-" + Format(-max(n, -math.MaxInt64))
	}
	names := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(names)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatInt(n, 10) + " B"
	}
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + " " + names[i]
}
