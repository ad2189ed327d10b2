// Package testwait is the repository's one way for a test to poll for a
// condition: check it on a short ticker until it holds. Where a component
// signals the event that makes the condition true (internal/testsignal),
// a test waits on the signal instead. The bound is a
// failure deadline only, generous so that a loaded machine still passes; a
// test that passes never reaches it.
package testwait

import (
	"testing"
	"time"
)

// Bound is how long For and ForDetail wait before they fail the test.
const Bound = 60 * time.Second

// Tick is how often a condition is polled.
const Tick = 5 * time.Millisecond

// For polls cond until it holds, and fails t, naming what, if it has not
// held within Bound.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ForDetail(t, what, func() (bool, string) { return cond(), "" })
}

// ForDetail is For with a condition that also says what it last saw; the
// failure message quotes the last detail.
func ForDetail(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	WithinDetail(t, Bound, what, cond)
}

// Within is For with a bound of its own, for a caller whose bound must be
// longer than Bound.
func Within(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	WithinDetail(t, bound, what, func() (bool, string) { return cond(), "" })
}

// WithinDetail is ForDetail with a bound of its own.
func WithinDetail(t testing.TB, bound time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	ok, detail := poll(bound, cond)
	if ok {
		return
	}
	if detail != "" {
		t.Fatalf("not within %v: %s (last seen: %s)", bound, what, detail)
	}
	t.Fatalf("not within %v: %s", bound, what)
}

// Until polls cond until it holds or bound has passed, and reports whether
// it held: for a caller that handles the failure itself (outside the test's
// goroutine, or with an error of its own).
func Until(bound time.Duration, cond func() bool) bool {
	ok, _ := poll(bound, func() (bool, string) { return cond(), "" })
	return ok
}

// UntilPaced is Until checking cond every pace instead of every Tick (see
// Paced).
func UntilPaced(pace, bound time.Duration, cond func() bool) bool {
	ok, _ := pollEvery(pace, bound, func() (bool, string) { return cond(), "" })
	return ok
}

// Paced is WithinDetail checking cond every pace instead of every Tick: for
// a condition whose check does something (a push that must find the store
// writable again), whose rate must stay low.
func Paced(t testing.TB, pace, bound time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if ok, detail := pollEvery(pace, bound, cond); !ok {
		t.Fatalf("not within %v: %s (last seen: %s)", bound, what, detail)
	}
}

// poll checks cond at once and then on every Tick until it holds or bound
// has passed; it returns the last result.
func poll(bound time.Duration, cond func() (bool, string)) (bool, string) {
	return pollEvery(Tick, bound, cond)
}

func pollEvery(pace, bound time.Duration, cond func() (bool, string)) (bool, string) {
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(pace)
	defer tick.Stop()
	for {
		ok, detail := cond()
		if ok || !time.Now().Before(deadline) {
			return ok, detail
		}
		<-tick.C
	}
}
