package mapping

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// MaxSeconds is the longest duration the gateway accepts anywhere: the pull
// wait (HTTP t, RPC pull timeout), the properties timeout, accum and ttl, and
// the push options delay and ttl. It is 10 years of 365 days. Without a bound,
// a time computed as now plus the duration overflows int64 nanoseconds
// (beyond the year 2262) and wraps into the past: a window that closes at
// once, a message that expires before it was pushed. Larger values are
// rejected (HTTP 400, RPC badarg / invalid_props), never clamped, so that a
// client learns its value was not taken.
const MaxSeconds = 10 * 365 * 24 * 60 * 60 // 315,360,000

// MaxDuration is MaxSeconds as a time.Duration.
const MaxDuration = MaxSeconds * time.Second

// secondsRange describes the accepted range in error messages.
var secondsRange = fmt.Sprintf("a number of seconds from 0 to %d (10 years)", MaxSeconds)

// CheckSeconds reports whether f is an accepted duration in seconds: a finite
// number from 0 to MaxSeconds. The error names the parameter and the range.
func CheckSeconds(name string, f float64) error {
	// NaN fails every comparison, +Inf is above MaxSeconds.
	if !(f >= 0 && f <= MaxSeconds) {
		return fmt.Errorf("%s must be %s", name, secondsRange)
	}
	return nil
}

// CheckDuration is CheckSeconds for a duration given as one (options built
// in Go: the same range, the same text).
func CheckDuration(name string, d time.Duration) error {
	if d < 0 || d > MaxDuration {
		return fmt.Errorf("%s must be %s", name, secondsRange)
	}
	return nil
}

// SecondsDuration converts f seconds to a duration after CheckSeconds.
func SecondsDuration(name string, f float64) (time.Duration, error) {
	if err := CheckSeconds(name, f); err != nil {
		return 0, err
	}
	// f*1e9 is at most 3.2e17, well inside int64.
	return time.Duration(f * float64(time.Second)), nil
}

// ParseSeconds parses a duration in seconds given as text (a query parameter:
// "30", "0.25", "1e3"), within the range of CheckSeconds.
func ParseSeconds(name, s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// Syntax errors, and out-of-range ones ("1e400") alike.
		f = math.NaN()
	}
	return SecondsDuration(name, f)
}

// Limits of the request headers the gateway stores with a message (the
// content-type, and the headers kept by lmq_hook_preserve_header): they travel
// in the NATS message's headers, which share the payload limit with the body
// (the gateway reserves 8 KiB for headers) and which JetStream caps at 64 KiB.
// A larger one is answered 431 (HTTP) rather than failing in JetStream.
const (
	// MaxHeaderValue is the longest value of one stored header, in bytes.
	MaxHeaderValue = 4 << 10
	// MaxStoredHeaders bounds the stored headers of one message together,
	// counted as they are written in NATS ("Name: value\r\n"); the rest of
	// the 8 KiB is left to the gateway's own headers.
	MaxStoredHeaders = 6 << 10
)
