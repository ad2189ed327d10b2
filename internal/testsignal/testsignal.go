// Package testsignal lets a test wait for an event inside a component (a
// pull request issued, a waiter parked, a window closed, a change applied)
// instead of polling for its effects or sleeping until it has probably
// happened. The idea is river's (rivershared/testsignal), written here our
// way.
//
// A component declares a Signal field per event and calls Signal(v) at the
// event, one line. Until a test calls Init the field is off: Signal costs a
// nil check (an atomic load of a nil pointer) and allocates nothing, so
// production code carries the fields at no cost. A test calls Init, at any
// time (the state is swapped in atomically, so a component already running
// sees it without a data race), before it causes the event; from then on
// every event is buffered until the test takes it with Wait, WaitFor or
// RequireEmpty.
//
// Signal never blocks the component: once the buffer is full further
// values are dropped and counted, and the test's next Wait or RequireEmpty
// fails saying so (a test that lets that many events pile up is waiting for
// the wrong thing).
package testsignal

import (
	"sync/atomic"
	"time"
)

// Bound is how long Wait and WaitFor wait before they fail the test: a
// failure deadline only, generous so that a loaded machine still passes
// (the same as internal/lmqtest/testwait's).
const Bound = 60 * time.Second

// Buffer is how many values a signal holds for its test before it drops
// them.
const Buffer = 4096

// TB is what a signal needs of a test: testing.TB has it. (An interface of
// its own, so that components need not import package testing.)
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Signal is an event of a component that a test may wait for, carrying a
// value of type T (what happened: a queue's name, a window's id, …). The
// zero value is off. A Signal must not be copied once in use.
type Signal[T any] struct {
	on atomic.Pointer[state[T]]
}

type state[T any] struct {
	t       TB
	ch      chan T
	dropped atomic.Int64
}

// Init turns the signal on for t, from now until t ends (t's cleanup turns
// it off again). Calling it again starts afresh.
func (s *Signal[T]) Init(t TB) {
	st := &state[T]{t: t, ch: make(chan T, Buffer)}
	s.on.Store(st)
	t.Cleanup(func() { s.on.CompareAndSwap(st, nil) })
}

// Signal records that the event happened, with v, if a test turned the
// signal on; it never blocks. A nil *Signal is off too.
func (s *Signal[T]) Signal(v T) {
	if s == nil {
		return
	}
	st := s.on.Load()
	if st == nil {
		return
	}
	select {
	case st.ch <- v:
	default:
		st.dropped.Add(1)
	}
}

// state returns the signal's state, panicking if Init was not called (no
// test to fail then), and failing the test if values were dropped.
func (s *Signal[T]) state() *state[T] {
	st := s.on.Load()
	if st == nil {
		panic("testsignal: waiting on a signal that was not initialised (Init)")
	}
	st.t.Helper()
	if n := st.dropped.Load(); n > 0 {
		st.t.Fatalf("testsignal: %d values dropped, the buffer (%d) was full", n, Buffer)
	}
	return st
}

// The helpers below run on the test's goroutine (they may call Fatalf on
// the test given to Init).

// WaitOrTimeout returns the next value signalled, waiting up to Bound for
// it; it fails the test if none comes.
func (s *Signal[T]) WaitOrTimeout() T {
	s.on.Load().t.Helper()
	return s.WaitFor("a signal", func(T) bool { return true })
}

// WaitFor returns the first value signalled for which match holds,
// dropping the others, waiting up to Bound in all; it fails the test,
// naming what, if none comes.
func (s *Signal[T]) WaitFor(what string, match func(T) bool) T {
	st := s.state()
	st.t.Helper()
	var zero T
	if got := s.WaitN(1, what, match); len(got) == 1 {
		return got[0]
	}
	return zero
}

// WaitN waits for n values for which match holds (dropping the others), up
// to Bound in all, and returns them in order; it fails the test, naming
// what and the count seen, if they do not all come.
func (s *Signal[T]) WaitN(n int, what string, match func(T) bool) []T {
	st := s.state()
	st.t.Helper()
	timeout := time.NewTimer(Bound)
	defer timeout.Stop()
	got := make([]T, 0, n)
	for len(got) < n {
		select {
		case v := <-st.ch:
			if match(v) {
				got = append(got, v)
			}
		case <-timeout.C:
			st.t.Fatalf("testsignal: not within %v: %s (%d of %d)", Bound, what, len(got), n)
			return got
		}
	}
	return got
}

// WaitUntil returns once cond holds, looking at it now and again after
// each value signalled (the values are dropped), up to Bound in all; it
// fails the test, naming what, if cond never holds. For a condition that
// only the signalled event can make true: with the signal turned on before
// the test caused the event, no event is missed.
func (s *Signal[T]) WaitUntil(what string, cond func() bool) {
	st := s.state()
	st.t.Helper()
	timeout := time.NewTimer(Bound)
	defer timeout.Stop()
	for !cond() {
		select {
		case <-st.ch:
		case <-timeout.C:
			st.t.Fatalf("testsignal: not within %v: %s", Bound, what)
			return
		}
	}
}

// RequireEmpty fails the test if a value was signalled and not taken (or
// was dropped): for a test whose point is that an event did not happen.
func (s *Signal[T]) RequireEmpty() {
	st := s.state()
	st.t.Helper()
	select {
	case v := <-st.ch:
		st.t.Fatalf("testsignal: unexpected signal %v", v)
	default:
	}
}

// Drain discards the values signalled so far and returns how many there
// were: for a test that counts from a point on.
func (s *Signal[T]) Drain() int {
	st := s.state()
	n := 0
	for {
		select {
		case <-st.ch:
			n++
		default:
			return n
		}
	}
}
