package sqs

import (
	"strings"
	"testing"
)

// TestValidNumber: SQS's Number values, at the edges of its documented
// precision (38 digits) and magnitude (10^-128 to 10^126).
func TestValidNumber(t *testing.T) {
	for _, s := range []string{
		"0", "-0", "+0", "0.0", "00", ".5", "5.", "-.5e-3", "42", "-1.5e3", "1E+5",
		"1e126", "1E+126", "-1e126", "9.99e125", "10e125", "0.1e127",
		"1e-128", "-1e-128", "0.0001e-124", "10e-129",
		"12345678901234567890123456789012345678", "-1.2345678901234567890123456789012345678e-100",
		"1234567890123456789012345678901234567800000", "0.000000000000000000000000000000000000000000012",
		"1e0000000000000000000000000000005", "0e99999999999999999999999", "0.000e-99999999999999999999999999",
	} {
		if !validNumber(s) {
			t.Errorf("validNumber(%q) = false, want true", s)
		}
	}
	for _, s := range []string{
		"", "+", "-", ".", "e5", "1e", "1e+", "1e-", "1.2.3", "1..2", "--1", "+-1", " 1", "1 ", "1\n",
		"NaN", "nan", "Inf", "inf", "+Inf", "Infinity", "-Infinity", "0x10", "0x1p-2", "1_000", "1,5", "0b1", "0o7",
		"1e127", "1.1e126", "2e126", "1.0000000000000000000000000000000000001e126", "1e-129", "0.9e-128", "-9e-129",
		"123456789012345678901234567890123456789", "1.00000000000000000000000000000000000001",
		"1e99999999999999999999999999999", "1e-99999999999999999999", "\u0661", "1f", "1d", "1e5.5",
	} {
		if validNumber(s) {
			t.Errorf("validNumber(%q) = true, want false", s)
		}
	}
}

func TestValidMessageID(t *testing.T) {
	for _, s := range []string{"a", "A-Z_0.9", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", strings.Repeat("x", 128)} {
		if !validMessageID(s) {
			t.Errorf("validMessageID(%q) = false", s)
		}
	}
	for _, s := range []string{"", " ", "a b", "\t", "\x00", "\x7f", "\xff", "caf\u00e9", strings.Repeat("x", 129)} {
		if validMessageID(s) {
			t.Errorf("validMessageID(%q) = true", s)
		}
	}
}
